//! Pages from templates: the Jinja templates under `templates/`, embedded in the binary and
//! HTML-escaped, each wrapped in the layout with the visitor's session and the security
//! headers every console answer carries.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use minijinja::Environment;
use serde::Serialize;
use serde_json::Value;

use crate::Console;
use crate::api::ArmProblem;
use crate::session::Visit;

/// Scripts, styles and connections only from the console itself; no inline script or style,
/// no frames, forms only back to it.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const TEMPLATES: &[(&str, &str)] = &[
    ("layout.html", include_str!("../templates/layout.html")),
    ("macros.html", include_str!("../templates/macros.html")),
    ("home.html", include_str!("../templates/home.html")),
    ("sign_in.html", include_str!("../templates/sign_in.html")),
    ("error.html", include_str!("../templates/error.html")),
    ("resources.html", include_str!("../templates/resources.html")),
    ("resource.html", include_str!("../templates/resource.html")),
    ("operation.html", include_str!("../templates/operation.html")),
    ("create.html", include_str!("../templates/create.html")),
    ("approvals.html", include_str!("../templates/approvals.html")),
];

pub(crate) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // A value a page leaves out (no error, no `posted` form yet) reads as empty, however deep.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Chainable);
    for (name, text) in TEMPLATES {
        // The templates are part of the binary; the unit test below renders each one.
        env.add_template(name, text).expect("console template parses");
    }
    env
}

/// A link back up the hierarchy.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Crumb {
    pub label: String,
    pub href: String,
}

pub(crate) struct Page {
    template: &'static str,
    title: String,
    status: StatusCode,
    crumbs: Vec<Crumb>,
}

impl Page {
    pub fn new(template: &'static str, title: impl Into<String>) -> Page {
        Page { template, title: title.into(), status: StatusCode::OK, crumbs: Vec::new() }
    }

    pub fn status(mut self, status: StatusCode) -> Page {
        self.status = status;
        self
    }

    pub fn crumbs(mut self, crumbs: Vec<Crumb>) -> Page {
        self.crumbs = crumbs;
        self
    }
}

/// The security headers of every console answer.
pub(crate) async fn harden(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    resp
}

impl Console {
    /// The page's template with `data`, inside the layout.
    pub(crate) fn render(&self, visit: &Visit, page: Page, data: Value) -> Response {
        let mut ctx = match data {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        ctx.insert("title".into(), page.title.into());
        ctx.insert("crumbs".into(), serde_json::to_value(&page.crumbs).unwrap_or_default());
        ctx.insert("csrf".into(), visit.csrf.clone().into());
        ctx.insert("signed_in".into(), visit.signed_in.into());
        ctx.insert("authentication".into(), self.authentication.into());
        let rendered =
            self.templates.get_template(page.template).and_then(|t| t.render(minijinja::Value::from_serialize(&ctx)));
        match rendered {
            Ok(html) => (page.status, Html(html)).into_response(),
            Err(e) => {
                tracing::error!(template = page.template, error = %e, "console page did not render");
                (StatusCode::INTERNAL_SERVER_ERROR, "The page could not be rendered; see the server log.")
                    .into_response()
            }
        }
    }

    /// The API's refusal as a page with its status.
    pub(crate) fn error_page(&self, visit: &Visit, status: StatusCode, problem: &ArmProblem) -> Response {
        let page = Page::new("error.html", status.canonical_reason().unwrap_or("Error")).status(status);
        self.render(visit, page, serde_json::json!({ "status": status.as_u16(), "problem": problem }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_renders_even_with_nothing_to_show() {
        let env = environment();
        for (name, _) in TEMPLATES {
            let page = env.get_template(name).unwrap().render(minijinja::context! {});
            assert!(page.is_ok(), "{name}: {page:?}");
        }
    }
}

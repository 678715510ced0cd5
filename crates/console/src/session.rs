//! Who the visitor is and that a form came from the console: the session cookie holds the
//! bearer credential the visitor signed in with (an API token, or a token from the identity
//! provider); every form carries the CSRF cookie's value, which another site can neither read
//! nor set, and the browser's own `Origin`/`Sec-Fetch-Site` must say same origin. Both cookies
//! are `HttpOnly` and `SameSite=Strict`, on `/ui` only, and `Secure` when served over HTTPS.

use std::sync::Arc;

use axum::Form;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use cookie::{Cookie, SameSite};
use serde::Deserialize;
use serde_json::json;
use slipway_listener::PeerAddr;

use crate::Console;
use crate::api::Visitor;
use crate::render::Page;

const SESSION_COOKIE: &str = "slipway_session";
const CSRF_COOKIE: &str = "slipway_csrf";

/// This visit's CSRF token (from its cookie, or made for it now).
#[derive(Clone)]
struct CsrfToken(String);

/// One request to the console: the visitor as the API will see them, and the CSRF token
/// forms must carry.
pub(crate) struct Visit {
    pub visitor: Visitor,
    pub csrf: String,
    pub signed_in: bool,
}

pub(crate) fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name && !c.value().is_empty())
        .map(|c| c.value().to_string())
}

fn set_cookie(name: &'static str, value: String, secure: bool, remove: bool) -> Option<HeaderValue> {
    let mut c = Cookie::build((name, value)).path("/ui").http_only(true).same_site(SameSite::Strict).secure(secure);
    if remove {
        c = c.max_age(cookie::time::Duration::ZERO);
    }
    HeaderValue::from_str(&c.build().to_string()).ok()
}

/// A random URL-safe text of `bytes` random bytes from the system's source.
pub(crate) fn random(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the system's random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// Gives a visitor without a CSRF cookie one (a random 128-bit value).
pub(crate) async fn csrf_cookie(State(console): State<Arc<Console>>, mut req: Request, next: Next) -> Response {
    let existing = cookie_value(req.headers(), CSRF_COOKIE);
    let token = existing.clone().unwrap_or_else(|| random(16));
    req.extensions_mut().insert(CsrfToken(token.clone()));
    let mut resp = next.run(req).await;
    if existing.is_none()
        && let Some(v) = set_cookie(CSRF_COOKIE, token, console.secure_cookies, false)
    {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

impl FromRequestParts<Arc<Console>> for Visit {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &Arc<Console>) -> Result<Self, Self::Rejection> {
        let token = cookie_value(&parts.headers, SESSION_COOKIE);
        let peer = parts.extensions.get::<PeerAddr>().copied();
        let csrf = parts.extensions.get::<CsrfToken>().map(|t| t.0.clone()).unwrap_or_default();
        let signed_in = token.is_some();
        Ok(Visit { visitor: Visitor::from_request(&parts.headers, peer, token), csrf, signed_in })
    }
}

/// Compares in time independent of where the first difference is.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a form post is the console's own: its CSRF field matches the cookie, and the
/// browser does not say it came from another site.
pub(crate) fn form_is_ours(visit: &Visit, headers: &HeaderMap, form_csrf: &str) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let same_site = match header("sec-fetch-site") {
        Some(site) => site == "same-origin" || site == "none",
        None => true,
    };
    let same_origin = match (header("origin"), header("host")) {
        (Some(origin), Some(host)) => origin.split_once("://").is_some_and(|(_, authority)| authority == host),
        (Some(_), None) => false,
        (None, _) => true,
    };
    !visit.csrf.is_empty() && same_secret(&visit.csrf, form_csrf) && same_site && same_origin
}

/// `403` for a form post that is not the console's own.
pub(crate) fn forged(console: &Console, visit: &Visit) -> Response {
    let problem = crate::api::ArmProblem::new(
        "InvalidCsrfToken",
        "This form did not come from this console (or its page is too old); reload the page and try again.",
    );
    console.error_page(visit, StatusCode::FORBIDDEN, &problem)
}

#[derive(Deserialize)]
pub(crate) struct SignInForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
}

pub(crate) async fn sign_in_page(State(console): State<Arc<Console>>, visit: Visit) -> Response {
    sign_in_again(&console, &visit, "")
}

/// The sign-in page, saying `why` the last attempt did not sign in (a 200: the page itself
/// loaded fine).
pub(crate) fn sign_in_again(console: &Console, visit: &Visit, why: &str) -> Response {
    let data = json!({ "error": why, "providers": console.oidc.offers() });
    console.render(visit, Page::new("sign_in.html", "Sign in"), data)
}

/// Signs in with `token` if the API takes it (anything but `401` means it authenticated):
/// the credential is kept in the session cookie.
pub(crate) async fn accept(console: &Console, visit: &Visit, token: String) -> Response {
    if token.is_empty() {
        return sign_in_again(console, visit, "Paste an API token or an access token.");
    }
    let mut trial = visit.visitor.clone();
    trial.token = Some(token.clone());
    let query = [("api-version", crate::PLATFORM_API_VERSION)];
    let answer = console.api.call(&trial, Method::GET, "/subscriptions", &query, None).await;
    if answer.status == StatusCode::UNAUTHORIZED {
        let why = answer.ok().err().map(|r| r.problem.message).unwrap_or_default();
        return sign_in_again(console, visit, &why);
    }
    let mut resp = Redirect::to("/ui/").into_response();
    if let Some(v) = set_cookie(SESSION_COOKIE, token, console.secure_cookies, false) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// The pasted-token form.
pub(crate) async fn sign_in(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<SignInForm>,
) -> Response {
    if !form_is_ours(&visit, &headers, &form.csrf) {
        return forged(&console, &visit);
    }
    accept(&console, &visit, form.token.trim().to_string()).await
}

#[derive(Deserialize)]
pub(crate) struct CsrfOnly {
    #[serde(default)]
    csrf: String,
}

pub(crate) async fn sign_out(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<CsrfOnly>,
) -> Response {
    if !form_is_ours(&visit, &headers, &form.csrf) {
        return forged(&console, &visit);
    }
    let mut resp = Redirect::to("/ui/sign-in").into_response();
    if let Some(v) = set_cookie(SESSION_COOKIE, String::new(), console.secure_cookies, true) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visit(csrf: &str) -> Visit {
        Visit { visitor: Visitor::default(), csrf: csrf.into(), signed_in: false }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn a_form_is_ours_only_with_the_cookie_value_from_our_origin() {
        let host = [("host", "127.0.0.1:8080")];
        assert!(form_is_ours(&visit("abc"), &headers(&host), "abc"));
        assert!(!form_is_ours(&visit("abc"), &headers(&host), "abd"));
        assert!(!form_is_ours(&visit(""), &headers(&host), ""));
        let cross = [("host", "127.0.0.1:8080"), ("origin", "http://evil.example")];
        assert!(!form_is_ours(&visit("abc"), &headers(&cross), "abc"));
        let fetched = [("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")];
        assert!(!form_is_ours(&visit("abc"), &headers(&fetched), "abc"));
        let same = [("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080"), ("sec-fetch-site", "same-origin")];
        assert!(form_is_ours(&visit("abc"), &headers(&same), "abc"));
    }

    #[test]
    fn cookies_are_http_only_strict_and_scoped_to_the_console() {
        let c = set_cookie(SESSION_COOKIE, "t".into(), true, false).unwrap();
        let text = c.to_str().unwrap();
        for part in ["slipway_session=t", "HttpOnly", "SameSite=Strict", "Path=/ui", "Secure"] {
            assert!(text.contains(part), "{text}");
        }
        let gone = set_cookie(SESSION_COOKIE, String::new(), false, true).unwrap();
        assert!(gone.to_str().unwrap().contains("Max-Age=0"), "{gone:?}");
    }
}

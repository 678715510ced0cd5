//! The web console at `/ui`: server-rendered pages over Slipway's own API. Every page is
//! built from API answers fetched in process with the visitor's credential (`api`), so it
//! shows only what the visitor may read and offers what their permissions at that scope
//! allow; every change it makes is an ordinary API request. Templates, the stylesheet and the
//! one script are embedded in the binary (nothing from elsewhere, works offline), and every
//! answer carries a strict Content-Security-Policy.

mod api;
mod assets;
mod form;
mod oidc;
mod pages;
mod render;
mod session;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use axum::response::Redirect;
use axum::routing::{get, post};
use minijinja::Environment;
use slipway_types::{ResourceType, TypeRegistry};

use crate::api::ApiClient;
pub use crate::oidc::OidcClient;

/// The api-version of the platform endpoints (subscriptions, groups, the overview lists).
pub(crate) const PLATFORM_API_VERSION: &str = "2025-06-01";
/// The api-version of the guardrails' paths (quotas, locks, policy): any ARM date is taken.
pub(crate) const QUOTA_API_VERSION: &str = "2023-02-01";

/// What the console needs from the server's configuration.
#[derive(Clone)]
pub struct ConsoleOptions {
    pub types: TypeRegistry,
    /// The RP location of operation URLs and the default of a new resource's `location`.
    pub location: String,
    /// Whether the API authenticates (then the console asks visitors to sign in).
    pub authentication: bool,
    /// Cookies only over HTTPS (the listener serves TLS).
    pub secure_cookies: bool,
    /// Where the identity provider sends the browser back (`server.public_base_url`); else
    /// the request's own host.
    pub public_base_url: Option<String>,
    /// Issuers whose sign-in page the console may use.
    pub oidc: Vec<OidcClient>,
}

pub(crate) struct Console {
    api: ApiClient,
    types: TypeRegistry,
    location: String,
    authentication: bool,
    secure_cookies: bool,
    public_base_url: Option<String>,
    oidc: oidc::Oidc,
    templates: Environment<'static>,
}

impl Console {
    /// A configured type by namespace and type name (any case).
    fn resource_type(&self, namespace: &str, type_name: &str) -> Option<Arc<ResourceType>> {
        self.types.get(namespace, type_name)
    }

    /// Types sorted by their full name, for pickers.
    fn sorted_types(&self) -> Vec<Arc<ResourceType>> {
        let mut all: Vec<_> = self.types.all().cloned().collect();
        all.sort_by_key(|t| format!("{}/{}", t.namespace, t.type_name).to_ascii_lowercase());
        all
    }
}

/// The newest api-version a type supports (what the console speaks to it).
pub(crate) fn api_version(ty: &ResourceType) -> String {
    ty.api_versions.iter().max().cloned().unwrap_or_default()
}

/// The console's routes. `api` is the API's own router: the console's requests go through it.
pub fn router(api: Router, options: ConsoleOptions) -> Router {
    let console = Arc::new(Console {
        api: ApiClient::new(api),
        types: options.types,
        location: options.location,
        authentication: options.authentication,
        secure_cookies: options.secure_cookies,
        public_base_url: options.public_base_url,
        oidc: oidc::Oidc::new(options.oidc),
        templates: render::environment(),
    });
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(pages::home))
        .route("/ui/sign-in", get(session::sign_in_page).post(session::sign_in))
        .route("/ui/sign-in/oidc", get(oidc::start))
        .route("/ui/sign-in/callback", get(oidc::callback))
        .route("/ui/sign-out", post(session::sign_out))
        .route("/ui/open", get(pages::open))
        .route("/ui/subscriptions/{subscription}", get(pages::subscription))
        .route("/ui/subscriptions/{subscription}/resourceGroups/{group}", get(pages::group))
        .route("/ui/resource", get(pages::resource))
        .route("/ui/resource/delete", post(pages::delete))
        .route("/ui/group/create", post(pages::create_group))
        .route("/ui/group/delete", post(pages::delete_group))
        .route("/ui/group/tags", post(pages::group_tags))
        .route("/ui/resource/action", post(pages::action))
        .route("/ui/resource/events", get(pages::events))
        .route("/ui/create", get(pages::create_page).post(pages::create))
        .route("/ui/operation", get(pages::operation))
        .route("/ui/operation/cancel", post(pages::cancel))
        .route("/ui/operation/decide", post(pages::decide))
        .route("/ui/subscriptions/{subscription}/approvals", get(pages::approvals))
        .route("/ui/operation/output", get(pages::output))
        .route("/ui/assets/{file}", get(assets::serve))
        .layer(middleware::from_fn_with_state(console.clone(), session::csrf_cookie))
        .layer(middleware::map_response(render::harden))
        .with_state(console)
}

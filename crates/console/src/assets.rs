//! The stylesheet, the icon and the one script, embedded in the binary. The script only
//! enhances: it follows a job's output and a resource page's event feed over Server-Sent
//! Events and refreshes a page's regions at each change; every page works without it. Small,
//! so a browser revalidates them on every use (`no-cache`) rather than keeping an old copy
//! after an upgrade.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const FILES: &[(&str, &str, &str)] = &[
    ("console.css", "text/css; charset=utf-8", include_str!("../assets/console.css")),
    ("console.js", "text/javascript; charset=utf-8", include_str!("../assets/console.js")),
    ("favicon.svg", "image/svg+xml", include_str!("../assets/favicon.svg")),
];

pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    match FILES.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, text)) => {
            let mut resp = (StatusCode::OK, *text).into_response();
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            resp
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

//! Reading a JSON request body: media type, size limit (with the oversize drain), parse.

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use slipway_domain::echo::echo;

use crate::error::ArmError;
use crate::handlers::Ctx;
use crate::{ApiState, request};

/// Reads and checks a JSON request body.
pub(crate) async fn json_body<T: serde::de::DeserializeOwned>(
    state: &ApiState,
    ctx: &Ctx,
    body: Body,
) -> Result<T, ArmError> {
    request::parse_body(&body_bytes(state, ctx, body).await?)
}

/// A request body's bytes, once its media type is JSON and its size within the limit.
pub(crate) async fn body_bytes(state: &ApiState, ctx: &Ctx, body: Body) -> Result<Vec<u8>, ArmError> {
    check_content_type(&ctx.headers)?;
    let limit = state.options.max_body_bytes;
    let too_large = || {
        ArmError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("The request body exceeds the limit of {limit} bytes."),
        )
    };
    let declared: Option<usize> = ctx.header("content-length").parse().ok();
    if declared.is_some_and(|n| n > limit.saturating_add(OVERSIZE_DRAIN)) {
        return Err(too_large());
    }
    read_limited(body, limit).await.ok_or_else(too_large)
}

/// No `Content-Type` (read as JSON), or one `application/json` with well-formed parameters
/// and at most a `utf-8` charset; anything else — unreadable bytes, a malformed media type,
/// several headers — is `415 UnsupportedMediaType`.
pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), ArmError> {
    let unsupported = |why: String| {
        ArmError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("{why}; send application/json."),
        )
    };
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let Some(value) = values.next() else { return Ok(()) };
    if values.next().is_some() {
        return Err(unsupported("The request has more than one Content-Type header".into()));
    }
    let text = value.to_str().map_err(|_| unsupported("The Content-Type header is not readable text".into()))?;
    let mut parts = text.split(';');
    let media = parts.next().unwrap_or_default().trim();
    let is_token =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !media.split_once('/').is_some_and(|(ty, sub)| is_token(ty) && is_token(sub)) {
        return Err(unsupported(format!("The Content-Type '{}' is not a media type", echo(media, 64))));
    }
    if !media.eq_ignore_ascii_case("application/json") {
        return Err(unsupported(format!("The content type '{}' is not supported", echo(media, 64))));
    }
    for param in parts.map(str::trim).filter(|p| !p.is_empty()) {
        let parsed = param.split_once('=').map(|(n, v)| (n.trim(), v.trim())).filter(|(n, v)| {
            is_token(n)
                && (is_token(v)
                    || (v.len() >= 2 && v.starts_with('"') && v.ends_with('"') && !v[1..v.len() - 1].contains('"')))
        });
        let Some((name, value)) = parsed else {
            return Err(unsupported(format!("The Content-Type parameter '{}' is malformed", echo(param, 64))));
        };
        if name.eq_ignore_ascii_case("charset") && !value.trim_matches('"').eq_ignore_ascii_case("utf-8") {
            return Err(unsupported(format!("The charset '{}' is not supported (only utf-8)", echo(value, 32))));
        }
    }
    Ok(())
}

/// How much of an oversized body is read and dropped before the `413` goes out: a client
/// still sending it would otherwise see its connection reset instead of the answer.
pub(crate) const OVERSIZE_DRAIN: usize = 16 * 1024 * 1024;

/// The body if it is at most `limit` bytes; `None` for a larger one (read on, unbuffered,
/// up to [`OVERSIZE_DRAIN`] more) or a body that failed to arrive.
pub(crate) async fn read_limited(mut body: Body, limit: usize) -> Option<Vec<u8>> {
    use axum::body::HttpBody;
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(data) = frame.ok()?.into_data() else { continue };
        seen = seen.saturating_add(data.len());
        if seen <= limit {
            buf.extend_from_slice(&data);
        } else if seen > limit.saturating_add(OVERSIZE_DRAIN) {
            return None;
        }
    }
    (seen <= limit).then_some(buf)
}

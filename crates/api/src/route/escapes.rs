//! Percent-escapes in a path: each segment decoded as the router reads it, and the whole
//! path so, for what a request names (its activity-log entry).

use std::borrow::Cow;

/// `path` with each segment percent-decoded as `route::parse` reads it: the names a request acts
/// on, whatever escapes it wrote them with.
pub(crate) fn decoded_path(path: &str) -> String {
    path.split('/').map(decode).collect::<Vec<_>>().join("/")
}

/// One path segment, percent-decoded. A segment whose escapes do not decode to UTF-8 stays as
/// it is (its `%` then fails every name rule).
pub(super) fn decode(seg: &str) -> Cow<'_, str> {
    if !seg.contains('%') {
        return Cow::Borrowed(seg);
    }
    let raw = seg.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (raw[i], raw.get(i + 1).copied().and_then(hex), raw.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_or(Cow::Borrowed(seg), Cow::Owned)
}

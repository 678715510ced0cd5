//! Operation identities: an [`OperationId`] (a UUID, version 7 for every id Slipway makes)
//! and the [`OperationPath`] its status is read at.

use std::fmt;

use super::{IdError, check_namespace, check_subscription};

/// An operation id: a lowercase UUID chosen by the API when it accepts a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationId(String);

impl OperationId {
    /// Accepts a UUID in any case (8-4-4-4-12 hex digits); stores it lowercased.
    pub fn parse(s: &str) -> Option<Self> {
        let groups: Vec<&str> = s.split('-').collect();
        let lens = [8, 4, 4, 4, 12];
        let ok = groups.len() == 5
            && groups.iter().zip(lens).all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()));
        ok.then(|| OperationId(s.to_ascii_lowercase()))
    }

    /// A version-7 UUID (RFC 9562), the one layout of every operation id Slipway makes: the
    /// first 48 bits `unix_millis` (so ids sort by when they were made), then the version,
    /// the low 12 bits of `rand_a`, the variant and the low 62 bits of `rand_b`. The API
    /// draws them at random; the domain derives them from a seed, having no random source,
    /// so a step repeated after a crash names the same operation.
    pub fn version7(unix_millis: u64, rand_a: u16, rand_b: u64) -> OperationId {
        let time = unix_millis & 0xffff_ffff_ffff;
        let rand_a = u64::from(rand_a & 0x0fff);
        let rand_b = rand_b & 0x3fff_ffff_ffff_ffff;
        let hi = (time << 16) | 0x7000 | rand_a;
        let lo = rand_b | 0x8000_0000_0000_0000;
        OperationId(format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        ))
    }

    /// The id's first 48 bits: for a version-7 id, the Unix milliseconds it was made at.
    pub fn leading_millis(&self) -> u64 {
        let text = self.0.as_str();
        u64::from_str_radix(&format!("{}{}", &text[..8], &text[9..13]), 16).unwrap_or_default()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where an operation's status is read:
/// `/subscriptions/{sub}/providers/{ns}/locations/{location}/operationStatuses/{id}`. The
/// API builds it; the console reads it back from a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationPath {
    pub subscription: String,
    pub namespace: String,
    pub location: String,
    pub id: OperationId,
}

impl OperationPath {
    /// Parses a status path (keywords matched case-insensitively, no query): the subscription a
    /// GUID, the namespace ARM's, the id an operation id.
    pub fn parse(path: &str) -> Result<OperationPath, IdError> {
        match path.split('/').collect::<Vec<_>>().as_slice() {
            ["", s, sub, p, ns, l, location, o, id]
                if s.eq_ignore_ascii_case("subscriptions")
                    && p.eq_ignore_ascii_case("providers")
                    && l.eq_ignore_ascii_case("locations")
                    && o.eq_ignore_ascii_case("operationStatuses")
                    && !location.is_empty() =>
            {
                check_subscription(sub)?;
                check_namespace(ns)?;
                let id = OperationId::parse(id).ok_or(IdError::NotAnOperationPath)?;
                Ok(OperationPath {
                    subscription: sub.to_string(),
                    namespace: ns.to_string(),
                    location: location.to_string(),
                    id,
                })
            }
            _ => Err(IdError::NotAnOperationPath),
        }
    }
}

impl OperationPath {
    /// The path of these parts as text, without building an `OperationPath` (the API writes
    /// one into every status body it serves).
    pub fn text(subscription: &str, namespace: &str, location: &str, id: &OperationId) -> String {
        format!("/subscriptions/{subscription}/providers/{namespace}/locations/{location}/operationStatuses/{id}")
    }
}

impl fmt::Display for OperationPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&OperationPath::text(&self.subscription, &self.namespace, &self.location, &self.id))
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUB: &str = "6F9619FF-8B86-D011-B42D-00C04FC964FF";

    #[test]
    fn version7_ids_carry_their_time_and_sort_by_it() {
        let a = OperationId::version7(1_700_000_000_000, u16::MAX, u64::MAX);
        let b = OperationId::version7(1_700_000_000_001, 0, 0);
        assert!(a < b, "{a} sorts before {b}");
        assert_eq!(a.leading_millis(), 1_700_000_000_000);
        assert_eq!(OperationId::parse(a.as_str()), Some(a.clone()), "a well-formed UUID");
        assert_eq!(&a.as_str()[14..15], "7", "version 7");
        assert!(matches!(&a.as_str()[19..20], "8" | "9" | "a" | "b"), "variant 1: {a}");
    }

    #[test]
    fn operation_paths_read_back_what_they_print() {
        let id = OperationId::version7(1_700_000_000_000, 7, 7);
        let text = format!("/subscriptions/{SUB}/providers/Ns.A/locations/local/operationStatuses/{id}");
        let path = OperationPath::parse(&text).unwrap();
        assert_eq!((path.namespace.as_str(), path.location.as_str(), &path.id), ("Ns.A", "local", &id));
        assert_eq!(path.to_string(), text);
        let upper = text.replace("operationStatuses", "OPERATIONSTATUSES");
        assert!(OperationPath::parse(&upper).is_ok(), "keywords in any case");
        for bad in [
            format!("/subscriptions/{SUB}/providers/Ns.A/locations/local/operationStatuses/x"),
            format!("/subscriptions/sub/providers/Ns.A/locations/local/operationStatuses/{id}"),
            format!("/subscriptions/{SUB}/providers/Ns.A/locations/local/operationResults/{id}"),
            format!("/subscriptions/{SUB}/providers/Ns.A/locations/local/operationStatuses/{id}/cancel"),
        ] {
            assert!(OperationPath::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn operation_ids_are_uuids() {
        let id = OperationId::parse("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap();
        assert_eq!(id.as_str(), "6f9619ff-8b86-d011-b42d-00c04fc964ff");
        assert!(OperationId::parse("not-a-uuid").is_none());
        assert!(OperationId::parse("6f9619ff-8b86-d011-b42d-00c04fc964f").is_none());
    }
}

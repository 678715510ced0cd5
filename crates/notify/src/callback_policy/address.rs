//! What kind of address an IP is: public, or one of the kinds a callback must never reach
//! (loopback, private, shared, link-local, multicast, broadcast, unspecified, reserved),
//! looking through the IPv6 forms that wrap an IPv4 address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address a refused one is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressKind {
    Loopback,
    Private,
    Shared,
    LinkLocal,
    Multicast,
    Broadcast,
    Unspecified,
    Reserved,
}

impl fmt::Display for AddressKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressKind::Loopback => "a loopback address",
            AddressKind::Private => "a private network address",
            AddressKind::Shared => "a shared (carrier-grade NAT) address",
            AddressKind::LinkLocal => "a link-local address",
            AddressKind::Multicast => "a multicast address",
            AddressKind::Broadcast => "the broadcast address",
            AddressKind::Unspecified => "an unspecified address",
            AddressKind::Reserved => "a reserved address",
        })
    }
}

/// `None` for a public address; else what it is.
pub fn classify(ip: IpAddr) -> Option<AddressKind> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressKind> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_broadcast() => AddressKind::Broadcast,
        (0, ..) => AddressKind::Unspecified,
        (127, ..) => AddressKind::Loopback,
        (10, ..) | (192, 168, _) => AddressKind::Private,
        (172, 16..=31, _) => AddressKind::Private,
        (100, 64..=127, _) => AddressKind::Shared,
        (169, 254, _) => AddressKind::LinkLocal,
        (224..=239, ..) => AddressKind::Multicast,
        // IETF protocol assignments, benchmarking, and the future-use block.
        (192, 0, 0) | (198, 18..=19, _) | (240..=255, ..) => AddressKind::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressKind> {
    if ip.is_unspecified() {
        return Some(AddressKind::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddressKind::Loopback);
    }
    let s = ip.segments();
    // An IPv4 address in IPv6 clothing is what it wraps: mapped (::ffff:a.b.c.d),
    // compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d).
    let embedded = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0, 0, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => {
            return classify_v4(embedded);
        }
        _ => {}
    }
    Some(match s[0] {
        0xfc00..=0xfdff => AddressKind::Private,
        // Site-local (deprecated, still private).
        0xfec0..=0xfeff => AddressKind::Private,
        0xfe80..=0xfebf => AddressKind::LinkLocal,
        0xff00..=0xffff => AddressKind::Multicast,
        // Local-use NAT64 (64:ff9b:1::/48), documentation (2001:db8::/32), discard (100::/64).
        0x0064 if s[1] == 0xff9b && s[2] == 1 => AddressKind::Private,
        0x2001 if s[1] == 0x0db8 => AddressKind::Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => AddressKind::Reserved,
        _ => return None,
    })
}

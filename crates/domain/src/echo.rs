//! Quoting a client's input in an error message without echoing hostile text.

/// A client's input as an error message may quote it: at most `max` characters, each one
/// that is not plain visible ASCII (or is a quote, a backslash, an angle bracket or `%`, so
/// nothing decodes into something else) shown as `?`, and `…` when cut. Hostile input is
/// never echoed whole.
pub fn echo(input: &str, max: usize) -> String {
    let mut out: String = input
        .chars()
        .take(max)
        .map(|c| if c.is_ascii_graphic() && !matches!(c, '"' | '\'' | '\\' | '<' | '>' | '`' | '%') { c } else { '?' })
        .collect();
    if input.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_are_short_and_plain() {
        assert_eq!(echo("sub-1", 40), "sub-1");
        assert_eq!(echo("sub%0D%0AX", 40), "sub?0D?0AX");
        assert_eq!(echo("a\r\nX-Injected: 1", 40), "a??X-Injected:?1");
        assert_eq!(echo("<b>'\"é", 40), "?b????");
        assert_eq!(echo(&"x".repeat(20_000), 8), "xxxxxxxx…");
        assert_eq!(echo("12345678", 8), "12345678");
    }
}

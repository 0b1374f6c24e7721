//! Redis's glob patterns (`KEYS`, `SCAN MATCH`): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.

/// Whether `s` matches `pattern` (byte-wise, as Redis's `stringmatchlen`).
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    // Backtracking point for the last `*`: (pattern index after it, string index).
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(pattern, p, s[i]) {
                        if hit {
                            p = next;
                            i += 1;
                            continue;
                        }
                    } else if s[i] == b'[' {
                        // An unterminated class matches a literal '['.
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == s[i] {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if c == s[i] {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last `*` swallow one more byte, or fail.
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pattern[p] == b'['`: whether it matched and
/// the index after the class, or `None` if the class is not terminated.
fn class(pattern: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = pattern.get(j) == Some(&b'^');
    if negate {
        j += 1;
    }
    let mut hit = false;
    loop {
        let &b = pattern.get(j)?;
        if b == b']' {
            break;
        }
        if b == b'\\' && j + 1 < pattern.len() {
            hit |= pattern[j + 1] == c;
            j += 2;
        } else if pattern.get(j + 1) == Some(&b'-')
            && pattern.get(j + 2).is_some_and(|&e| e != b']')
        {
            let (lo, hi) = (b.min(pattern[j + 2]), b.max(pattern[j + 2]));
            hit |= (lo..=hi).contains(&c);
            j += 3;
        } else {
            hit |= b == c;
            j += 1;
        }
    }
    Some((hit != negate, j + 1))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_glob_examples() {
        let m = |p: &str, s: &str| matches(p.as_bytes(), s.as_bytes());
        assert!(m("*", "") && m("*", "anything"));
        assert!(m("h?llo", "hello") && m("h?llo", "hallo") && !m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo") && m("h*llo", "heeeello") && !m("h*llo", "helloo"));
        assert!(m("h[ae]llo", "hello") && m("h[ae]llo", "hallo") && !m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo") && !m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo") && !m("h[a-b]llo", "hcllo"));
        assert!(m("a\\*b", "a*b") && !m("a\\*b", "axb"));
        assert!(m("user:*:name", "user:42:name") && !m("user:*:name", "user:42:age"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx") && !m("*a*b*c*", "xxcxxbxxaxx"));
    }
}

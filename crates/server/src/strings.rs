//! String commands that compute a new value from the old one (INCRBYFLOAT, SETRANGE) or
//! compare two values (LCS), each inside the caller's transaction like the rest of
//! [`crate::keyspace`].

use verso_engine::Txn;

use crate::keyspace::{parse_i64, CmdError, CmdResult};
use crate::resp::Reply;
use crate::stored::{self, Space, KIND_STRING};

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

const NOT_FLOAT: &str = "value is not a valid float";
/// Redis refuses longer float strings (`MAX_LONG_DOUBLE_CHARS`).
const FLOAT_CHARS_MAX: usize = 5 * 1024;
/// LCS keeps a table of `(len1 + 1) * (len2 + 1)` 32-bit cells; Verso refuses larger ones
/// (256 MiB of table) instead of allocating them.
pub const LCS_CELLS_MAX: u64 = 1 << 26;

/// Parses a Redis float argument: no spaces, not NaN (infinities parse; a result that is
/// not finite is refused by the caller).
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b.len() > FLOAT_CHARS_MAX {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    if s.bytes().any(|c| c.is_ascii_whitespace()) {
        return None;
    }
    let x: f64 = s.parse().ok()?;
    if x.is_nan() {
        return None;
    }
    // Out of range, as strtod's ERANGE: an infinity the text does not spell, or a zero from
    // a mantissa that is not zero (underflow).
    if x.is_infinite() && !s.to_ascii_lowercase().contains("inf") {
        return None;
    }
    let mantissa = s.split(['e', 'E']).next().unwrap_or(s);
    if x == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c)) {
        return None;
    }
    Some(x)
}

/// A float as Redis prints INCRBYFLOAT's result: fixed notation, no exponent, no trailing
/// zeros. Verso computes in `f64` (Redis in `long double`), and prints the shortest string
/// that reads back as the same `f64`, so `10.5 + 0.1` is `10.6` in both.
pub fn format_f64(x: f64) -> String {
    if x == 0.0 {
        return "0".into(); // also for -0.0, as Redis prints it
    }
    format!("{x}")
}

/// INCRBYFLOAT key increment.
pub fn incr_by_float(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], by: &[u8]) -> CmdResult {
    let by = parse_f64(by).ok_or_else(|| err(NOT_FLOAT))?;
    let (old, deadline) = match stored::read_string_with_deadline(txn, s, key)? {
        Some((v, d)) => (parse_f64(v).ok_or_else(|| err(NOT_FLOAT))?, d),
        None => (0.0, None),
    };
    let new = old + by;
    if !new.is_finite() {
        return Err(err("increment would produce NaN or Infinity"));
    }
    let text = format_f64(new).into_bytes();
    stored::write(txn, s, key, KIND_STRING, deadline, &text)?;
    Ok(Reply::Bulk(text))
}

/// SETRANGE key offset value: overwrites from `offset`, padding with zero bytes; the new
/// length. An empty `value` changes nothing (and creates no key).
pub fn setrange(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    key: &[u8],
    offset: &[u8],
    value: &[u8],
) -> CmdResult {
    let offset = parse_i64(offset).ok_or_else(|| err(crate::keyspace::NOT_INTEGER))?;
    if offset < 0 {
        return Err(err("offset is out of range"));
    }
    let (old, deadline) = match stored::read_string_with_deadline(txn, s, key)? {
        Some((v, d)) => (Some(v), d),
        None => (None, None),
    };
    let old_len = old.map_or(0, <[u8]>::len);
    if value.is_empty() {
        return Ok(Reply::Integer(old_len as i64));
    }
    // Checked before the padded value is allocated.
    let end = (offset as u64).saturating_add(value.len() as u64);
    if end > txn.value_size_max().saturating_sub(stored::HEADER_LEN_MAX) as u64 {
        return Err(err("string exceeds maximum allowed size"));
    }
    let end = end as usize;
    let offset = offset as usize;
    let mut new = Vec::with_capacity(old_len.max(end));
    new.extend_from_slice(old.unwrap_or_default());
    if new.len() < end {
        new.resize(end, 0);
    }
    new[offset..end].copy_from_slice(value);
    let len = new.len();
    stored::write(txn, s, key, KIND_STRING, deadline, &new)?;
    Ok(Reply::Integer(len as i64))
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN], as Redis 7 answers it (an
/// absent key is an empty string); the same backtracking, so the same subsequence and the
/// same matches, last first.
pub fn lcs(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (mut len_only, mut idx, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"LEN" => len_only = true,
            b"IDX" => idx = true,
            b"WITHMATCHLEN" => with_len = true,
            b"MINMATCHLEN" if i + 1 < args.len() => {
                let n = parse_i64(&args[i + 1]).ok_or_else(|| err(crate::keyspace::NOT_INTEGER))?;
                min_len = n.max(0) as u64;
                i += 1;
            }
            _ => return Err(err("syntax error")),
        }
        i += 1;
    }
    if len_only && idx {
        return Err(err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let a = stored::read_string(txn, s, &args[0])?.unwrap_or_default();
    let b = stored::read_string(txn, s, &args[1])?.unwrap_or_default();
    let cells = (a.len() as u64 + 1).saturating_mul(b.len() as u64 + 1);
    if cells > LCS_CELLS_MAX {
        return Err(err(&format!(
            "strings too long for LCS: (len1 + 1) * (len2 + 1) is at most {LCS_CELLS_MAX} in Verso"
        )));
    }
    let table = lcs_table(a, b);
    let total = table[table.len() - 1];
    if len_only {
        return Ok(Reply::Integer(i64::from(total)));
    }
    let (common, matches) = backtrack(a, b, &table, idx);
    if !idx {
        return Ok(Reply::Bulk(common));
    }
    let range = |(s, e): (usize, usize)| {
        Reply::Array(vec![Reply::Integer(s as i64), Reply::Integer(e as i64)])
    };
    let matches = matches
        .into_iter()
        .filter(|m| min_len == 0 || m.len as u64 >= min_len)
        .map(|m| {
            let mut item = vec![range(m.a), range(m.b)];
            if with_len {
                item.push(Reply::Integer(m.len as i64));
            }
            Reply::Array(item)
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::Bulk(b"matches".to_vec()), Reply::Array(matches)),
        (
            Reply::Bulk(b"len".to_vec()),
            Reply::Integer(i64::from(total)),
        ),
    ]))
}

/// One run of the common subsequence: inclusive ranges in each string, and its length.
#[derive(Debug, PartialEq, Eq)]
pub struct LcsMatch {
    pub a: (usize, usize),
    pub b: (usize, usize),
    pub len: usize,
}

/// The LCS lengths of every pair of prefixes, row-major, `(a.len() + 1) * (b.len() + 1)`.
fn lcs_table(a: &[u8], b: &[u8]) -> Vec<u32> {
    let w = b.len() + 1;
    let mut dp = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    dp
}

/// Redis's walk back from the table's corner: the subsequence, and (if `ranges`) its runs
/// from the last to the first.
fn backtrack(a: &[u8], b: &[u8], dp: &[u32], ranges: bool) -> (Vec<u8>, Vec<LcsMatch>) {
    let w = b.len() + 1;
    let mut common = vec![0u8; dp[dp.len() - 1] as usize];
    let mut k = common.len();
    let mut matches = Vec::new();
    let (mut i, mut j) = (a.len(), b.len());
    // The run being grown backwards: (a_start, a_end, b_start, b_end).
    let mut run: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let emit;
        if a[i - 1] == b[j - 1] {
            common[k - 1] = a[i - 1];
            k -= 1;
            run = Some(match run {
                Some((sa, ea, sb, eb)) if sa == i && sb == j => (sa - 1, ea, sb - 1, eb),
                Some(_) => unreachable!("a match right after a run extends it"),
                None => (i - 1, i - 1, j - 1, j - 1),
            });
            let (sa, _, sb, _) = run.expect("set above");
            emit = sa == 0 || sb == 0;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = run.is_some();
        }
        if emit {
            if let Some((sa, ea, sb, eb)) = run.take() {
                if ranges {
                    matches.push(LcsMatch {
                        a: (sa, ea),
                        b: (sb, eb),
                        len: ea - sa + 1,
                    });
                }
            }
        }
    }
    (common, matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_documented_lcs() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        let dp = lcs_table(a, b);
        let (common, matches) = backtrack(a, b, &dp, true);
        assert_eq!(common, b"mytext");
        // Redis's documentation: matches [[4,7],[5,8]] then [[2,3],[0,1]], len 6.
        assert_eq!(
            matches,
            vec![
                LcsMatch {
                    a: (4, 7),
                    b: (5, 8),
                    len: 4
                },
                LcsMatch {
                    a: (2, 3),
                    b: (0, 1),
                    len: 2
                },
            ]
        );
    }

    #[test]
    fn floats_print_as_redis_prints_them() {
        assert_eq!(format_f64(10.5 + 0.1), "10.6");
        assert_eq!(format_f64(5.0e3 + 2.0e2), "5200");
        assert_eq!(format_f64(-0.0), "0");
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b""), None);
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e400"), None, "overflow");
        assert_eq!(parse_f64(b"1e-400"), None, "underflow");
        assert_eq!(parse_f64(b"0e5"), Some(0.0));
        assert_eq!(parse_f64(b"-0.000"), Some(-0.0));
    }
}

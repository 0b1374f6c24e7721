//! `verso bench compare`: the numeric fields that result files of one benchmark share,
//! side by side, with each file's ratio to the first and a marker where it moved by more
//! than [`CHANGE_THRESHOLD`].

use std::fmt::Write as _;

use super::{describe, distinguishing, same_benchmark, ResultFile, ResultsError};

/// A ratio further than this from 1 is marked as a change.
pub const CHANGE_THRESHOLD: f64 = 0.05;

/// Fields shown first and always (when the files have them), in this order.
pub const KEY_FIELDS: &[&str] = &[
    "txn_per_sec",
    "new_order_per_sec",
    "successful_per_sec",
    "ops_per_sec",
    "gets_per_sec",
    "puts_per_sec",
    "scans_per_sec",
    "p50_us",
    "p99_us",
    "p999_us",
    "abort_rate",
    "peak_rss_bytes",
    "rss_ratio",
    "rss_end_bytes",
];

/// One compared field.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The flattened field name.
    pub field: String,
    /// Its value in each file, in the order given.
    pub values: Vec<f64>,
    /// `values[i] / values[0]` for i >= 1 (so one shorter than `values`); `None` when the
    /// first value is 0 and this one is not.
    pub ratios: Vec<Option<f64>>,
    /// Whether some ratio is beyond ±[`CHANGE_THRESHOLD`] (or undefined).
    pub changed: bool,
    /// Whether it is one of [`KEY_FIELDS`].
    pub key: bool,
}

/// The comparison of two or more result files.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The benchmark they all ran.
    pub benchmark: String,
    /// Each file's path and the configuration that sets it apart from the others.
    pub files: Vec<(String, String)>,
    /// Key fields first, then the rest in the first file's order.
    pub rows: Vec<Row>,
}

/// Compares `files` (at least two, all of one benchmark). Without `all`, only the key
/// fields and the other fields that changed are kept.
pub fn compare(files: &[ResultFile], all: bool) -> Result<Comparison, ResultsError> {
    if files.len() < 2 {
        return Err(ResultsError::Input(
            "compare needs at least two result files".into(),
        ));
    }
    let benchmark = same_benchmark(files)?.to_string();
    let mut rows: Vec<Row> = Vec::new();
    for (field, v) in &files[0].fields {
        // A churn report's per-interval samples are a curve (`verso bench plot` draws it);
        // set side by side row by row they would bury the figures that sum it up.
        if !v.is_number() || field.starts_with("samples.") {
            continue;
        }
        let values: Option<Vec<f64>> = files.iter().map(|f| f.get(field)?.as_f64()).collect();
        if let Some(values) = values {
            rows.push(row(field, values));
        }
    }
    if rows.is_empty() {
        return Err(ResultsError::Input(
            "the files share no numeric field".into(),
        ));
    }
    let rank = |r: &Row| {
        KEY_FIELDS
            .iter()
            .position(|k| *k == r.field)
            .unwrap_or(KEY_FIELDS.len())
    };
    // Stable: the non-key fields keep the report's order.
    rows.sort_by_key(rank);
    if !all {
        rows.retain(|r| r.key || r.changed);
    }
    let refs: Vec<&ResultFile> = files.iter().collect();
    let differing = distinguishing(&refs);
    Ok(Comparison {
        benchmark,
        files: files
            .iter()
            .map(|f| (f.path.display().to_string(), describe(f, &differing)))
            .collect(),
        rows,
    })
}

fn row(field: &str, values: Vec<f64>) -> Row {
    assert!(values.len() >= 2);
    let base = values[0];
    let ratios: Vec<Option<f64>> = values[1..]
        .iter()
        .map(|&v| {
            if base != 0.0 {
                Some(v / base)
            } else if v == 0.0 {
                Some(1.0)
            } else {
                None
            }
        })
        .collect();
    let changed = ratios.iter().any(|r| match r {
        Some(r) => (r - 1.0).abs() > CHANGE_THRESHOLD,
        None => true,
    });
    Row {
        field: field.to_string(),
        key: KEY_FIELDS.contains(&field),
        values,
        ratios,
        changed,
    }
}

/// A number in at most about 10 characters: integers whole, others with 4 significant
/// digits, very large or small ones in exponent form.
fn number(v: f64) -> String {
    let a = v.abs();
    if v == v.trunc() && a < 1e12 {
        format!("{v:.0}")
    } else if a != 0.0 && !(1e-3..1e9).contains(&a) {
        format!("{v:.3e}")
    } else if a >= 1000.0 {
        format!("{v:.1}")
    } else {
        let decimals = if a >= 100.0 {
            2
        } else if a >= 1.0 {
            3
        } else {
            4
        };
        format!("{v:.decimals$}")
    }
}

/// Column letters: A, B, ..., Z, then F27, F28, ...
fn label(i: usize) -> String {
    match u8::try_from(i) {
        Ok(b) if b < 26 => char::from(b'A' + b).to_string(),
        _ => format!("F{}", i + 1),
    }
}

impl Comparison {
    /// The table, newline-terminated.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let n = self.files.len();
        let _ = writeln!(
            s,
            "verso bench compare: {}, {n} files (ratios against A; * marks a change beyond \
             ±{:.0}%)",
            self.benchmark,
            CHANGE_THRESHOLD * 100.0
        );
        for (i, (path, config)) in self.files.iter().enumerate() {
            let _ = writeln!(s, "  {:<3} {path}  {config}", label(i));
        }
        let width = self
            .rows
            .iter()
            .map(|r| r.field.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = write!(s, "{:<width$}", "field");
        for i in 0..n {
            let _ = write!(s, " {:>12}", label(i));
        }
        for i in 1..n {
            let _ = write!(s, " {:>9}", format!("{}/A", label(i)));
        }
        s.push('\n');
        let mut others_header = false;
        for r in &self.rows {
            if !r.key && !others_header {
                others_header = true;
                if self.rows.first().is_some_and(|f| f.key) {
                    s.push('\n');
                }
            }
            let _ = write!(s, "{:<width$}", r.field);
            for v in &r.values {
                let _ = write!(s, " {:>12}", number(*v));
            }
            for ratio in &r.ratios {
                let text = ratio.map_or("n/a".into(), |x| format!("{x:.3}"));
                let _ = write!(s, " {text:>9}");
            }
            if r.changed {
                s.push_str("  *");
            }
            s.push('\n');
        }
        s
    }
}

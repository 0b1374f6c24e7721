//! Saved results: loading the JSON reports of `--json` runs, flattening them into named
//! scalar fields, and the three things built on that: [`csv`] (`--csv`), [`compare`]
//! (`verso bench compare`) and [`plot`] (`verso bench plot`).
//!
//! Every report (YCSB, TPC-C, TATP, index) goes through the same path: serialize to a
//! `serde_json::Value`, then [`flatten`] it. Nested objects become dotted names
//! (`per_type.new_order.p99_us`); an array of objects that each carry a distinct string
//! `name` is keyed by that name (`per_type.get_subscriber_data.p99_us`), any other array by
//! position (`rw1.per_thread.0.puts`). The order of fields is the report's own (serde_json's
//! `preserve_order`), so CSV columns and comparisons read like the JSON.
//!
//! **Invariant:** nothing here panics on a bad file: every problem is a [`ResultsError`]
//! naming the file.

pub mod compare;
pub mod csv;
mod draw;
pub mod plot;

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Result files larger than this are refused: a report is a few kilobytes, so anything
/// this big is not one (and is not worth reading whole into memory).
pub const RESULT_FILE_BYTES_MAX: u64 = 64 << 20;

/// Objects nested deeper than this are kept as one JSON-text cell instead of being
/// flattened further (reports nest three levels at most).
pub const FLATTEN_DEPTH_MAX: usize = 16;

/// Top-level string fields that describe a run's outcome or build, not its configuration.
const NOT_CONFIG: &[&str] = &[
    "benchmark",
    "version",
    "consistency",
    "rss_bounded",
    "live_set_constant",
];

/// Top-level numeric fields that are configuration (the rest are measurements).
const CONFIG_NUMBERS: &[&str] = &[
    "threads",
    "warehouses",
    "subscribers",
    "keys",
    "value_size",
    "ops_per_txn",
    "read_ratio",
    "scan_length",
    "theta",
    "long_readers",
    "stock_scan_ms",
    "sample_interval_s",
];

/// Why results could not be read, compared or plotted.
#[derive(Debug)]
pub enum ResultsError {
    /// A missing or unreadable file, one without a JSON report, reports that do not go
    /// together, or a field that is not there: the user's to fix (exit status 2).
    Input(String),
    /// Charts that could not be drawn or written.
    Output(String),
}

impl fmt::Display for ResultsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultsError::Input(m) | ResultsError::Output(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ResultsError {}

/// One flattened field: a dotted name and a scalar (number, string, bool or null).
pub type Field = (String, Value);

/// One loaded report.
#[derive(Clone, Debug)]
pub struct ResultFile {
    /// Where it came from (as given; used in messages and tables).
    pub path: PathBuf,
    /// The report's `benchmark` field ("ycsb", "tpcc", "tatp", "index", ...).
    pub benchmark: String,
    /// The report, flattened, in the report's field order.
    pub fields: Vec<Field>,
}

impl ResultFile {
    /// Reads `path`: the saved stdout of a `--json` run (the last non-empty line is the
    /// report) or a plain JSON file.
    pub fn load(path: &Path) -> Result<Self, ResultsError> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| ResultsError::Input(format!("cannot read {shown}: {e}")))?;
        if !meta.is_file() {
            return Err(ResultsError::Input(format!("{shown} is not a file")));
        }
        if meta.len() > RESULT_FILE_BYTES_MAX {
            return Err(ResultsError::Input(format!(
                "{shown} is {} bytes: too large for a result file (at most {})",
                meta.len(),
                RESULT_FILE_BYTES_MAX
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| ResultsError::Input(format!("cannot read {shown}: {e}")))?;
        Self::parse(path, &text)
    }

    /// Parses the text of a result file (see [`ResultFile::load`]).
    pub fn parse(path: &Path, text: &str) -> Result<Self, ResultsError> {
        let shown = path.display();
        let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) else {
            return Err(ResultsError::Input(format!(
                "{shown} is empty: expected the saved output of a --json run"
            )));
        };
        let object = match serde_json::from_str::<Value>(last.trim()) {
            Ok(Value::Object(m)) => m,
            _ => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return Err(ResultsError::Input(format!(
                        "no JSON report in {shown}: its last non-empty line is not a JSON \
                         object, nor is the whole file (save the output of a --json run)"
                    )))
                }
            },
        };
        Self::from_object(path, object)
    }

    /// Wraps an already-parsed report.
    pub fn from_object(path: &Path, object: Map<String, Value>) -> Result<Self, ResultsError> {
        let Some(Value::String(benchmark)) = object.get("benchmark") else {
            return Err(ResultsError::Input(format!(
                "{}: the JSON object has no \"benchmark\" field; is it a verso bench report?",
                path.display()
            )));
        };
        let benchmark = benchmark.clone();
        let fields = flatten(&Value::Object(object));
        assert!(
            !fields.is_empty(),
            "a report with a benchmark field has fields"
        );
        Ok(ResultFile {
            path: path.to_path_buf(),
            benchmark,
            fields,
        })
    }

    /// The scalar at a flattened name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// The number at a flattened name. `write_ratio`, when the report has none, is derived
    /// as 100 - `read_ratio` (YCSB reports only the read ratio).
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.get(name) {
            Some(v) => v.as_f64(),
            None if name == "write_ratio" => self.number("read_ratio").map(|r| 100.0 - r),
            None => None,
        }
    }

    /// The configuration fields: top-level strings and booleans (other than the benchmark,
    /// version and outcome) and the known numeric settings, in report order.
    pub fn config(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|(k, v)| {
            !k.contains('.')
                && match v {
                    Value::String(_) | Value::Bool(_) => !NOT_CONFIG.contains(&k.as_str()),
                    _ => CONFIG_NUMBERS.contains(&k.as_str()),
                }
        })
    }
}

/// Loads every path, failing on the first bad one.
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<ResultFile>, ResultsError> {
    paths.iter().map(|p| ResultFile::load(p)).collect()
}

/// The benchmark all `files` share, or an error naming the first that differs.
pub fn same_benchmark(files: &[ResultFile]) -> Result<&str, ResultsError> {
    let Some(first) = files.first() else {
        return Err(ResultsError::Input("no result files given".into()));
    };
    if let Some(other) = files.iter().find(|f| f.benchmark != first.benchmark) {
        return Err(ResultsError::Input(format!(
            "different benchmark kinds: {} is {}, {} is {}",
            first.path.display(),
            first.benchmark,
            other.path.display(),
            other.benchmark
        )));
    }
    Ok(&first.benchmark)
}

/// The configuration fields whose values are not the same in all `files` (a field one
/// file lacks counts as null there), in the first file's order, then any only later
/// files have.
pub fn distinguishing(files: &[&ResultFile]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for f in files {
        for (k, _) in f.config() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names.retain(|k| {
        let first = files.first().and_then(|f| f.get(k));
        files.iter().any(|f| f.get(k) != first)
    });
    names
}

/// `name=value` pairs of `fields` in `file`, space-separated ("" when `fields` is empty).
pub fn describe(file: &ResultFile, fields: &[String]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|k| format!("{k}={}", file.get(k).map_or("-".into(), scalar_text)))
        .collect();
    parts.join(" ")
}

/// A scalar as plain text: strings unquoted, null as "null".
pub fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Flattens `v` into dotted names and scalars (see the module documentation). A scalar at
/// the top is named "value"; empty objects and arrays contribute nothing.
pub fn flatten(v: &Value) -> Vec<Field> {
    let mut out = Vec::new();
    match v {
        Value::Object(_) | Value::Array(_) => flatten_into("", v, 0, &mut out),
        scalar => out.push(("value".to_string(), scalar.clone())),
    }
    out
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The `name` of every element, if each is an object with a string `name` and no two
/// share one.
fn element_names(items: &[Value]) -> Option<Vec<&str>> {
    let mut names = Vec::with_capacity(items.len());
    for item in items {
        let name = item.get("name")?.as_str()?;
        if name.is_empty() || names.contains(&name) {
            return None;
        }
        names.push(name);
    }
    Some(names)
}

fn flatten_into(prefix: &str, v: &Value, depth: usize, out: &mut Vec<Field>) {
    let nested = matches!(v, Value::Object(_) | Value::Array(_));
    if nested && depth >= FLATTEN_DEPTH_MAX {
        out.push((prefix.to_string(), Value::String(v.to_string())));
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten_into(&join(prefix, k), x, depth + 1, out);
            }
        }
        Value::Array(items) => match element_names(items) {
            Some(names) => {
                for (name, item) in names.into_iter().zip(items) {
                    let key = join(prefix, name);
                    if let Value::Object(m) = item {
                        for (k, x) in m.iter().filter(|(k, _)| k.as_str() != "name") {
                            flatten_into(&join(&key, k), x, depth + 2, out);
                        }
                    }
                }
            }
            None => {
                for (i, item) in items.iter().enumerate() {
                    flatten_into(&join(prefix, &i.to_string()), item, depth + 1, out);
                }
            }
        },
        scalar => out.push((prefix.to_string(), scalar.clone())),
    }
}

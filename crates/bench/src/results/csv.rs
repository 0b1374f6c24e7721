//! `--csv`: a report as two CSV lines, a header of flattened field names and one row of
//! values (RFC 4180 quoting: a cell with a comma, quote or line break is wrapped in quotes,
//! its quotes doubled). Numbers are written as the JSON writes them, strings bare, null as
//! an empty cell.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::{flatten, Field};

/// `cell` quoted for CSV when it needs to be.
pub fn escape(cell: &str) -> Cow<'_, str> {
    if cell.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", cell.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(cell)
    }
}

/// A scalar as an (unescaped) CSV cell.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The header line and the data line of `fields`, each newline-terminated.
pub fn from_fields(fields: &[Field]) -> String {
    let header: Vec<Cow<'_, str>> = fields.iter().map(|(k, _)| escape(k)).collect();
    let row: Vec<String> = fields
        .iter()
        .map(|(_, v)| escape(&cell(v)).into_owned())
        .collect();
    assert_eq!(header.len(), row.len());
    let mut out = header.join(",");
    out.push('\n');
    out.push_str(&row.join(","));
    out.push('\n');
    out
}

/// `v` flattened and written as two CSV lines.
pub fn from_value(v: &Value) -> String {
    from_fields(&flatten(v))
}

/// Any serializable report as two CSV lines (it goes through its JSON form, so the columns
/// are the JSON's fields).
pub fn from_report<T: Serialize>(report: &T) -> Result<String, serde_json::Error> {
    Ok(from_value(&serde_json::to_value(report)?))
}

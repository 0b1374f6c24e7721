//! `verso bench plot`: charts of saved results, each written as SVG and PNG.
//!
//! Files are grouped by benchmark. For each benchmark two charts are drawn:
//! - **throughput** (the `y` field, default `txn_per_sec`) against the `x` field (default
//!   `threads`, or the first of `write_ratio`, `warehouses`, `long_readers`, `keys` that
//!   varies when the thread count does not), one line per series, where a series is the
//!   rest of the configuration that differs between the files (workload, index, ...);
//!   repeated runs of one configuration are drawn as points around their mean;
//! - **latency**: p50, p99 and p99.9 of every file on a log scale, one column per file.
//!
//! `verso bench churn` reports are drawn differently: their point is a curve over time, so
//! they get one chart of two panels, RSS (MiB) and throughput against seconds, one line per
//! file, from the `samples` of each report.
//!
//! Text is drawn with DejaVu Sans, embedded in the binary and registered with plotters'
//! `ab_glyph` renderer, so charts render the same on machines without any system font.

use std::path::PathBuf;

use super::draw::{
    self, Chart, LatencyChart, LineChart, Panel, Series, Slot, TimeChart, QUANTILES,
};
use super::{describe, distinguishing, scalar_text, ResultFile, ResultsError};

/// The x fields tried, in order, when none is given.
const AUTO_X: &[&str] = &[
    "threads",
    "write_ratio",
    "warehouses",
    "long_readers",
    "keys",
];

/// What to draw and where.
#[derive(Clone, Debug)]
pub struct PlotOptions {
    /// Directory the charts are written to (created if missing).
    pub out_dir: PathBuf,
    /// The x field; `None` picks one per benchmark (see the module documentation).
    pub x: Option<String>,
    /// The y field of the throughput chart; `None`: `txn_per_sec`, or `ops_per_sec` for
    /// the index benchmark.
    pub y: Option<String>,
}

/// What [`plot`] did.
#[derive(Clone, Debug, Default)]
pub struct Plotted {
    /// Files written, in order.
    pub written: Vec<PathBuf>,
    /// Charts or files left out, and why.
    pub notes: Vec<String>,
}

/// Draws the charts of `files` into `opts.out_dir`.
pub fn plot(files: &[ResultFile], opts: &PlotOptions) -> Result<Plotted, ResultsError> {
    if files.is_empty() {
        return Err(ResultsError::Input("no result files given".into()));
    }
    draw::register_fonts()?;
    std::fs::create_dir_all(&opts.out_dir).map_err(|e| {
        ResultsError::Output(format!("cannot create {}: {e}", opts.out_dir.display()))
    })?;
    let mut groups: Vec<(&str, Vec<&ResultFile>)> = Vec::new();
    for f in files {
        match groups.iter_mut().find(|(b, _)| *b == f.benchmark) {
            Some((_, g)) => g.push(f),
            None => groups.push((&f.benchmark, vec![f])),
        }
    }
    let mut done = Plotted::default();
    let write = |name: String, chart: Option<Chart>, done: &mut Plotted| {
        let Some(chart) = chart else { return Ok(()) };
        let size = chart.size();
        for ext in ["svg", "png"] {
            let path = opts.out_dir.join(format!("{name}.{ext}"));
            draw::write_chart(&chart, &path, size)?;
            done.written.push(path);
        }
        Ok::<(), ResultsError>(())
    };
    for (bench, group) in &groups {
        if *bench == "churn" {
            // A churn run's result is a curve, not a point against a configuration.
            let chart = churn_chart(group, &mut done.notes);
            write("churn_rss_over_time".into(), chart, &mut done)?;
            continue;
        }
        let x = opts.x.clone().unwrap_or_else(|| auto_x(group));
        let y = opts.y.clone().unwrap_or_else(|| default_y(group));
        let charts = [
            (
                format!(
                    "{}_{}_vs_{}",
                    file_part(bench),
                    file_part(&y),
                    file_part(&x)
                ),
                line_chart(bench, group, &x, &y, &mut done.notes),
            ),
            (
                format!("{}_latency", file_part(bench)),
                latency_chart(bench, group, &x, &mut done.notes),
            ),
        ];
        for (name, chart) in charts {
            write(name, chart, &mut done)?;
        }
    }
    if done.written.is_empty() {
        return Err(ResultsError::Input(format!(
            "nothing to plot: {}",
            done.notes.join("; ")
        )));
    }
    Ok(done)
}

/// `field` as a piece of a file name (the benchmark name too: it comes from the file).
fn file_part(field: &str) -> String {
    field
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn varies(group: &[&ResultFile], field: &str) -> bool {
    let values: Vec<f64> = group.iter().filter_map(|f| f.number(field)).collect();
    values.iter().any(|v| *v != values[0])
}

fn auto_x(group: &[&ResultFile]) -> String {
    let pick = AUTO_X
        .iter()
        .find(|x| varies(group, x))
        .unwrap_or(&AUTO_X[0]);
    pick.to_string()
}

fn default_y(group: &[&ResultFile]) -> String {
    let has = |k: &str| group.iter().any(|f| f.number(k).is_some());
    if has("txn_per_sec") || !has("ops_per_sec") {
        "txn_per_sec".into()
    } else {
        "ops_per_sec".into()
    }
}

/// The configuration that sets the files apart, less the x field (and its complement:
/// the write ratio is 100 - the read ratio).
fn series_fields(group: &[&ResultFile], x: &str) -> Vec<String> {
    let mut fields = distinguishing(group);
    fields.retain(|k| {
        k != x
            && !(x == "write_ratio" && k == "read_ratio")
            && !(x == "read_ratio" && k == "write_ratio")
    });
    fields
}

/// The configuration all files share, as a footer line.
fn footer(group: &[&ResultFile], varying: &[String]) -> String {
    let shared: Vec<String> = group[0]
        .config()
        .filter(|(k, _)| !varying.contains(k))
        .map(|(k, v)| format!("{k}={}", scalar_text(v)))
        .collect();
    format!("{} file(s); same in all: {}", group.len(), shared.join(" "))
}

fn line_chart(
    bench: &str,
    group: &[&ResultFile],
    x: &str,
    y: &str,
    notes: &mut Vec<String>,
) -> Option<Chart> {
    let mut usable = Vec::new();
    for f in group {
        if f.number(x).is_some() && f.number(y).is_some() {
            usable.push(*f);
        } else {
            notes.push(format!(
                "{}: no numeric {x} and {y}, left out of the {bench} {y} chart",
                f.path.display()
            ));
        }
    }
    if usable.is_empty() {
        notes.push(format!(
            "no {bench} file has numeric {x} and {y}: no {y} chart"
        ));
        return None;
    }
    let fields = series_fields(&usable, x);
    let mut series: Vec<Series> = Vec::new();
    for f in &usable {
        let label = match describe(f, &fields) {
            d if d.is_empty() => bench.to_string(),
            d => d,
        };
        let point = (f.number(x)?, f.number(y)?);
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(point),
            None => series.push(Series {
                label,
                points: vec![point],
                line: Vec::new(),
            }),
        }
    }
    // By label, as the latency chart orders its columns: a series has one colour in both.
    series.sort_by(|a, b| a.label.cmp(&b.label));
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut i = 0;
        while i < s.points.len() {
            let x0 = s.points[i].0;
            let same: Vec<f64> = s.points[i..]
                .iter()
                .take_while(|p| p.0 == x0)
                .map(|p| p.1)
                .collect();
            s.line
                .push((x0, same.iter().sum::<f64>() / same.len() as f64));
            i += same.len();
        }
    }
    let mut varying = fields;
    varying.push(x.to_string());
    Some(Chart::Lines(LineChart {
        title: format!("{bench}: {y} against {x}"),
        footer: footer(&usable, &varying),
        x_desc: axis_desc(x),
        y_desc: axis_desc(y),
        series,
    }))
}

fn latency_chart(
    bench: &str,
    group: &[&ResultFile],
    x: &str,
    notes: &mut Vec<String>,
) -> Option<Chart> {
    let values = |f: &ResultFile| -> Vec<(usize, f64)> {
        (QUANTILES.iter().enumerate())
            .filter_map(|(i, (_, k))| Some((i, f.number(k).filter(|v| *v > 0.0)?)))
            .collect()
    };
    let mut usable: Vec<&ResultFile> = group
        .iter()
        .copied()
        .filter(|f| !values(f).is_empty())
        .collect();
    if usable.is_empty() {
        notes.push(format!(
            "no {bench} file has latency percentiles: no latency chart"
        ));
        return None;
    }
    let series = series_fields(&usable, x);
    let series_label = |f: &ResultFile| describe(f, &series);
    // Columns grouped by series, then in x order.
    usable.sort_by(|a, b| {
        series_label(a)
            .cmp(&series_label(b))
            .then((a.number(x).unwrap_or(f64::NAN)).total_cmp(&b.number(x).unwrap_or(f64::NAN)))
    });
    let varying = distinguishing(&usable);
    let mut labels: Vec<String> = usable.iter().map(|f| describe(f, &varying)).collect();
    let unique = (1..labels.len()).all(|i| !labels[..i].contains(&labels[i]));
    if labels.iter().any(String::is_empty) || !unique {
        labels = usable
            .iter()
            .map(|f| {
                f.path
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into())
            })
            .collect();
    }
    let mut series_seen: Vec<String> = Vec::new();
    let slots = usable
        .iter()
        .zip(labels)
        .map(|(f, label)| {
            let s = series_label(f);
            let color = series_seen.iter().position(|x| *x == s).unwrap_or_else(|| {
                series_seen.push(s);
                series_seen.len() - 1
            });
            Slot {
                label,
                color,
                values: values(f),
            }
        })
        .collect();
    Some(Chart::Latency(LatencyChart {
        title: format!("{bench}: latency percentiles (log scale)"),
        footer: footer(&usable, &varying),
        slots,
    }))
}

fn axis_desc(field: &str) -> String {
    match field {
        "threads" => "worker threads".into(),
        "write_ratio" => "write ratio (% of point operations)".into(),
        "read_ratio" => "read ratio (% of point operations)".into(),
        "txn_per_sec" => "transactions per second".into(),
        "ops_per_sec" => "operations per second".into(),
        "new_order_per_sec" => "New-Order transactions per second".into(),
        other => other.to_string(),
    }
}

/// Each sample's (t_s, RSS in MiB, txn/s), from the flattened `samples.{i}.{field}` fields
/// (in one pass: a ten-minute run has thousands of them).
fn churn_samples(f: &ResultFile) -> Vec<(f64, f64, f64)> {
    let mut rows: std::collections::BTreeMap<usize, [Option<f64>; 3]> = Default::default();
    for (k, v) in &f.fields {
        let Some((i, name)) = k.strip_prefix("samples.").and_then(|r| r.split_once('.')) else {
            continue;
        };
        let (Ok(i), Some(v)) = (i.parse::<usize>(), v.as_f64()) else {
            continue;
        };
        let slot = match name {
            "t_s" => 0,
            "rss_bytes" => 1,
            "txn_per_sec" => 2,
            _ => continue,
        };
        rows.entry(i).or_default()[slot] = Some(v);
    }
    let mib = f64::from(1u32 << 20);
    rows.values()
        .filter_map(|r| Some((r[0]?, r[1]? / mib, r[2]?)))
        .collect()
}

fn churn_chart(group: &[&ResultFile], notes: &mut Vec<String>) -> Option<Chart> {
    let mut usable = Vec::new();
    for f in group {
        let samples = churn_samples(f);
        if samples.is_empty() {
            notes.push(format!(
                "{}: no samples, left out of the churn chart",
                f.path.display()
            ));
        } else {
            usable.push((*f, samples));
        }
    }
    if usable.is_empty() {
        notes.push("no churn file has samples: no churn chart".into());
        return None;
    }
    let files: Vec<&ResultFile> = usable.iter().map(|(f, _)| *f).collect();
    let varying = distinguishing(&files);
    let mut labels: Vec<String> = files.iter().map(|f| describe(f, &varying)).collect();
    let unique = (1..labels.len()).all(|i| !labels[..i].contains(&labels[i]));
    if labels.iter().any(String::is_empty) || !unique {
        labels = files
            .iter()
            .map(|f| {
                f.path
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into())
            })
            .collect();
    }
    let mut rss = Panel {
        y_desc: "RSS (MiB)".into(),
        series: Vec::new(),
        marks: Vec::new(),
    };
    let mut tput = Panel {
        y_desc: "transactions per second".into(),
        series: Vec::new(),
        marks: Vec::new(),
    };
    for ((f, samples), label) in usable.iter().zip(&labels) {
        let ratio = f
            .number("rss_ratio")
            .map_or(String::new(), |r| format!(" (end/reference {r:.3})"));
        rss.series.push((
            format!("{label}{ratio}"),
            samples.iter().map(|s| (s.0, s.1)).collect(),
        ));
        tput.series
            .push((label.clone(), samples.iter().map(|s| (s.0, s.2)).collect()));
    }
    // With one run, where its RSS was measured from and the bound it was held to.
    if let [(f, _)] = usable.as_slice() {
        if let (Some(at), Some(bytes)) = (
            f.number("rss_reference_s"),
            f.number("rss_first_minute_bytes"),
        ) {
            let mib = bytes / f64::from(1u32 << 20);
            rss.marks.push((format!("at {at:.0} s: {mib:.0} MiB"), mib));
            rss.marks
                .push((format!("+10 %: {:.0} MiB", mib * 1.1), mib * 1.1));
        }
    }
    Some(Chart::Time(TimeChart {
        title: "churn: RSS and throughput at a constant live set".into(),
        footer: footer(&files, &varying),
        panels: vec![rss, tput],
    }))
}

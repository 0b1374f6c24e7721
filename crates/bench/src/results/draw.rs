//! Drawing the charts [`super::plot`] assembles, with plotters, as SVG or PNG.

use std::error::Error;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::ResultsError;

/// The latency fields drawn, with their legend names.
pub(super) const QUANTILES: &[(&str, &str)] =
    &[("p50", "p50_us"), ("p99", "p99_us"), ("p99.9", "p999_us")];

/// Line colours (Tableau 10): distinct, and all legible on white.
const COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Size of the throughput chart, pixels.
const LINE_CHART_SIZE: (u32, u32) = (1024, 640);
/// Width of a time chart, and height per panel.
const TIME_CHART_WIDTH: u32 = 1024;
const TIME_PANEL_HEIGHT: u32 = 400;
/// Latency chart: height, and bounds on its width (it grows with the files).
const LATENCY_HEIGHT: u32 = 640;
const LATENCY_WIDTH_MIN: u32 = 1024;
const LATENCY_WIDTH_MAX: u32 = 8192;
/// Values are written next to the points while there are at most this many.
const POINT_LABELS_MAX: usize = 40;
/// Characters of a footer line before it wraps, and footer lines kept.
const FOOTER_LINE_CHARS: usize = 140;
const FOOTER_LINES_MAX: usize = 3;

/// The family every text uses; DejaVu Sans is registered under it.
const FONT: &str = "sans-serif";

/// One line of the throughput chart.
pub(super) struct Series {
    pub(super) label: String,
    /// Every file's point, sorted by x.
    pub(super) points: Vec<(f64, f64)>,
    /// The mean y at each distinct x, sorted by x.
    pub(super) line: Vec<(f64, f64)>,
}

/// The throughput chart.
pub(super) struct LineChart {
    pub(super) title: String,
    pub(super) footer: String,
    pub(super) x_desc: String,
    pub(super) y_desc: String,
    pub(super) series: Vec<Series>,
}

/// One column of the latency chart.
pub(super) struct Slot {
    pub(super) label: String,
    pub(super) color: usize,
    /// (quantile index in `QUANTILES`, microseconds), positive values only.
    pub(super) values: Vec<(usize, f64)>,
}

/// The latency chart.
pub(super) struct LatencyChart {
    pub(super) title: String,
    pub(super) footer: String,
    pub(super) slots: Vec<Slot>,
}

/// One panel of a [`TimeChart`]: lines over seconds.
pub(super) struct Panel {
    pub(super) y_desc: String,
    /// (label, (seconds, y) sorted by time) per file.
    pub(super) series: Vec<(String, Vec<(f64, f64)>)>,
    /// Horizontal reference lines: (label, y).
    pub(super) marks: Vec<(String, f64)>,
}

/// Panels stacked over one time axis (a churn run's RSS and throughput).
pub(super) struct TimeChart {
    pub(super) title: String,
    pub(super) footer: String,
    pub(super) panels: Vec<Panel>,
}

/// A chart ready to draw.
pub(super) enum Chart {
    Lines(LineChart),
    Latency(LatencyChart),
    Time(TimeChart),
}

/// Registers the embedded DejaVu Sans (regular and bold) as [`FONT`], once per process.
pub(super) fn register_fonts() -> Result<(), ResultsError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
            && register_font(FONT, FontStyle::Bold, dejavu::sans::bold()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(ResultsError::Output(
            "the embedded DejaVu Sans font could not be loaded".into(),
        ))
    }
}

/// `v` with an SI suffix: 1.23M, 45.6k, 0.5.
fn si(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = if scaled == scaled.trunc() || scaled.abs() >= 100.0 {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.2}")
    };
    format!("{text}{suffix}")
}

/// The footer split into lines of at most about `FOOTER_LINE_CHARS` characters.
fn wrap(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split(' ') {
        let last = lines.len() - 1;
        if !lines[last].is_empty() && lines[last].len() + 1 + word.len() > FOOTER_LINE_CHARS {
            lines.push(String::new());
        }
        let last = lines.len() - 1;
        if !lines[last].is_empty() {
            lines[last].push(' ');
        }
        lines[last].push_str(word);
    }
    if lines.len() > FOOTER_LINES_MAX {
        lines.truncate(FOOTER_LINES_MAX);
        lines[FOOTER_LINES_MAX - 1].push_str(" …");
    }
    lines
}

impl Chart {
    pub(super) fn size(&self) -> (u32, u32) {
        match self {
            Chart::Lines(_) => LINE_CHART_SIZE,
            Chart::Time(c) => (
                TIME_CHART_WIDTH,
                TIME_PANEL_HEIGHT.saturating_mul(c.panels.len().max(1) as u32) + 60,
            ),
            Chart::Latency(c) => {
                let longest = c
                    .slots
                    .iter()
                    .map(|s| s.label.chars().count())
                    .max()
                    .unwrap_or(0);
                let slot = (longest as u32)
                    .saturating_mul(8)
                    .saturating_add(24)
                    .max(120);
                let width = (c.slots.len() as u32)
                    .saturating_mul(slot)
                    .saturating_add(160);
                (
                    width.clamp(LATENCY_WIDTH_MIN, LATENCY_WIDTH_MAX),
                    LATENCY_HEIGHT,
                )
            }
        }
    }

    fn footer(&self) -> &str {
        match self {
            Chart::Lines(c) => &c.footer,
            Chart::Latency(c) => &c.footer,
            Chart::Time(c) => &c.footer,
        }
    }

    /// Draws the chart on `root`: the footer lines at the bottom, the chart above.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let lines = wrap(self.footer());
        let (_, height) = root.dim_in_pixel();
        let footer_px = 18 * lines.len() as u32 + 10;
        let (main, foot) = root.split_vertically(height.saturating_sub(footer_px));
        for (i, line) in lines.iter().enumerate() {
            let y = 4 + 18 * i as i32;
            foot.draw(&Text::new(
                line.as_str(),
                (12, y),
                (FONT, 14).into_font().color(&BLACK.mix(0.75)),
            ))?;
        }
        match self {
            Chart::Lines(c) => draw_lines(&main, c),
            Chart::Latency(c) => draw_latency(&main, c),
            Chart::Time(c) => draw_time(&main, c),
        }
    }
}

fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &LineChart,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let all = || c.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1) = all().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    let y_max = all().fold(0.0f64, |m, p| m.max(p.1));
    // From zero, unless a --y field goes negative.
    let y0 = all().fold(0.0f64, |m, p| m.min(p.1)) * 1.1;
    // Whole-number x values (threads, warehouses, ratios) get whole-number ticks only.
    let whole = all().all(|p| p.0 == p.0.trunc());
    let x_labels = if whole {
        ((x1 - x0) as usize + 1).clamp(2, 12)
    } else {
        10
    };
    let pad = if x1 > x0 { (x1 - x0) * 0.05 } else { 1.0 };
    x0 -= pad;
    x1 += pad;
    // Headroom above the highest point for the legend.
    let y1 = if y_max > 0.0 { y_max * 1.3 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, (FONT, 24).into_font().style(FontStyle::Bold))
        .margin(18)
        .x_label_area_size(52)
        .y_label_area_size(84)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(c.x_desc.as_str())
        .y_desc(c.y_desc.as_str())
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .x_labels(x_labels)
        .x_label_formatter(&|v| {
            if whole && v.fract().abs() > 1e-9 {
                String::new()
            } else {
                si(*v)
            }
        })
        .y_label_formatter(&|v| si(*v))
        .light_line_style(BLACK.mix(0.06))
        .bold_line_style(BLACK.mix(0.15))
        .draw()?;
    let labelled = c.series.iter().map(|s| s.points.len()).sum::<usize>() <= POINT_LABELS_MAX;
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                s.line.iter().copied(),
                color.stroke_width(3),
            ))?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
        chart.draw_series(s.points.iter().map(|&p| {
            let text = if labelled { si(p.1) } else { String::new() };
            EmptyElement::at(p)
                + Circle::new((0, 0), 5, color.filled())
                + Text::new(text, (8, -18), (FONT, 13).into_font().color(&color))
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.5))
        .label_font((FONT, 15))
        .draw()?;
    Ok(())
}

fn draw_latency<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &LatencyChart,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let all = || c.slots.iter().flat_map(|s| s.values.iter().map(|v| v.1));
    let lo = all().fold(f64::MAX, f64::min);
    let hi = all().fold(0.0f64, f64::max);
    // Room below the lowest point, and above the highest for the legend.
    let (y0, y1) = (lo / 2.0, hi * 6.0);
    // Labels fall on powers of the base: powers of 2 label a narrow range legibly.
    let log_base = if y1 / y0 < 1e3 { 2.0 } else { 10.0 };
    let n = i32::try_from(c.slots.len()).map_err(|_| "too many files for one chart")?;
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, (FONT, 24).into_font().style(FontStyle::Bold))
        .margin(18)
        .x_label_area_size(52)
        .y_label_area_size(84)
        .build_cartesian_2d(
            (0..n - 1).into_segmented(),
            (y0..y1).log_scale().base(log_base),
        )?;
    let label_of = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => usize::try_from(*i)
            .ok()
            .and_then(|i| c.slots.get(i))
            .map_or(String::new(), |s| s.label.clone()),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(c.slots.len() + 1)
        .x_label_formatter(&label_of)
        .y_desc("latency (microseconds, log scale)")
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .y_label_formatter(&|v| si(*v))
        .light_line_style(BLACK.mix(0.06))
        .bold_line_style(BLACK.mix(0.15))
        .draw()?;
    let at = |i: usize| SegmentValue::CenterOf(i as i32);
    chart.draw_series(c.slots.iter().enumerate().map(|(i, s)| {
        let lo = s.values.iter().map(|v| v.1).fold(f64::MAX, f64::min);
        let hi = s.values.iter().map(|v| v.1).fold(0.0f64, f64::max);
        PathElement::new(
            vec![(at(i), lo), (at(i), hi)],
            COLORS[s.color % COLORS.len()].stroke_width(2),
        )
    }))?;
    for (q, (name, _)) in QUANTILES.iter().enumerate() {
        let points: Vec<(usize, f64, RGBColor)> = c
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let v = s.values.iter().find(|v| v.0 == q)?.1;
                Some((i, v, COLORS[s.color % COLORS.len()]))
            })
            .collect();
        if points.is_empty() {
            continue; // no file has it (TPC-C reports no overall p99.9): no legend entry
        }
        chart
            .draw_series(points.iter().map(|&(i, v, color)| {
                EmptyElement::at((at(i), v))
                    + marker(q, color)
                    + Text::new(
                        // Value first: plotters' ab_glyph text ignores left side
                        // bearings, so a digit 1 after a space swallows the space.
                        format!("{} {}", si(v), name),
                        (10, -8),
                        (FONT, 13).into_font().color(&color),
                    )
            }))?
            .label(*name)
            .legend(move |(x, y)| EmptyElement::at((x + 10, y)) + marker(q, BLACK));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.5))
        .label_font((FONT, 15))
        .draw()?;
    Ok(())
}

fn draw_time<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &TimeChart,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let (title, rest) = area.split_vertically(40);
    title.draw(&Text::new(
        c.title.as_str(),
        (18, 8),
        (FONT, 24).into_font().style(FontStyle::Bold),
    ))?;
    let points = || {
        c.panels
            .iter()
            .flat_map(|p| p.series.iter().flat_map(|s| &s.1))
    };
    let t_max = points().fold(0.0f64, |m, p| m.max(p.0)).max(1e-3);
    let last = c.panels.len().saturating_sub(1);
    for (i, (panel, area)) in c
        .panels
        .iter()
        .zip(rest.split_evenly((c.panels.len(), 1)))
        .enumerate()
    {
        let ys = || panel.series.iter().flat_map(|s| s.1.iter().map(|p| p.1));
        let y_max = ys()
            .chain(panel.marks.iter().map(|m| m.1))
            .fold(0.0f64, f64::max);
        // From zero: a bounded curve should look flat against its whole height, not
        // against the noise of its last few percent. Headroom for the legend.
        let y1 = if y_max > 0.0 { y_max * 1.35 } else { 1.0 };
        let mut chart = ChartBuilder::on(&area)
            .margin(18)
            .x_label_area_size(if i == last { 52 } else { 28 })
            .y_label_area_size(84)
            .build_cartesian_2d(0.0..t_max * 1.02, 0.0..y1)?;
        let mut mesh = chart.configure_mesh();
        mesh.y_desc(panel.y_desc.as_str())
            .axis_desc_style((FONT, 17))
            .label_style((FONT, 14))
            .x_label_formatter(&|v| si(*v))
            .y_label_formatter(&|v| si(*v))
            .light_line_style(BLACK.mix(0.06))
            .bold_line_style(BLACK.mix(0.15));
        if i == last {
            mesh.x_desc("seconds since the churn began");
        }
        mesh.draw()?;
        for (j, (label, line)) in panel.series.iter().enumerate() {
            let color = COLORS[j % COLORS.len()];
            chart
                .draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
        }
        for (label, y) in &panel.marks {
            let grey = BLACK.mix(0.45);
            chart.draw_series(DashedLineSeries::new(
                [(0.0, *y), (t_max, *y)],
                8,
                6,
                grey.stroke_width(1),
            ))?;
            chart.draw_series(std::iter::once(Text::new(
                label.clone(),
                (t_max * 0.01, *y),
                (FONT, 13).into_font().color(&grey),
            )))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.5))
            .label_font((FONT, 15))
            .draw()?;
    }
    Ok(())
}

/// The marker of quantile `q` (circle, triangle, cross), centred on (0, 0).
fn marker<DB: DrawingBackend>(q: usize, color: RGBColor) -> DynElement<'static, DB, (i32, i32)> {
    match q {
        0 => Circle::new((0, 0), 6, color.filled()).into_dyn(),
        1 => TriangleMarker::new((0, 0), 7, color.filled()).into_dyn(),
        _ => Cross::new((0, 0), 6, color.stroke_width(3)).into_dyn(),
    }
}

pub(super) fn write_chart(
    chart: &Chart,
    path: &Path,
    size: (u32, u32),
) -> Result<(), ResultsError> {
    let result = if path.extension().is_some_and(|e| e == "svg") {
        let root = SVGBackend::new(path, size).into_drawing_area();
        chart.draw(&root).and_then(|()| Ok(root.present()?))
    } else {
        let root = BitMapBackend::new(path, size).into_drawing_area();
        chart.draw(&root).and_then(|()| Ok(root.present()?))
    };
    result.map_err(|e| ResultsError::Output(format!("cannot write {}: {e}", path.display())))
}

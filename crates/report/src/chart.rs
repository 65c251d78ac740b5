//! The report's charts: the canvases every chart is drawn on (a desktop's
//! and a phone's), the plotters set-up and finish they share ([`draw_svg`],
//! [`category_labels`], [`legend`], [`color`]), and the chart shapes the
//! report draws (lines against load levels, percentile lines, grouped bars,
//! stacked time panels), each to an SVG string; and [`figure`], which puts
//! a chart's two drawings and its caption in a page. Knows no run or
//! section: `html.rs`, the kinds' own charts (`tpch.rs`) and the
//! miss-ratio page (`mrc.rs`) hand it labelled numbers.

use std::fmt::Write as _;

use plotters::prelude::*;

use crate::table::esc_html;
use crate::units::fmt_num;
use crate::ReportError;

/// A chart's canvas. Every chart is drawn twice: for a desktop, and for a
/// phone at the width a phone shows it, so its text keeps its size instead
/// of shrinking with the picture (an 860 px chart scaled to a phone's width
/// took its labels from 10 px to 4 px); CSS shows the one that fits. The
/// phone's is 360 px, the narrowest common phone (360-412 CSS px), and CSS
/// gives it the whole width (into the page's 8 px margins) and never
/// scales it down: a narrower screen scrolls it sideways instead.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Canvas {
    /// Width and height in px.
    pub w: u32,
    /// Height in px (of one panel, for stacked time panels: scaled).
    pub h: u32,
    /// Font size of labels, axis names and legends (plotters writes an
    /// SVG font size of this / 1.24: 15 is 12.1 px).
    pub text: u32,
    /// Font size of the chart's title.
    pub caption: u32,
    /// Room left of the plot for the y labels.
    pub y_area: u32,
    /// Drawn for a phone.
    pub narrow: bool,
}

/// A desktop's chart.
pub(crate) const WIDE: Canvas = Canvas { w: 860, h: 380, text: 14, caption: 18, y_area: 70, narrow: false };
/// A phone's chart: drawn at the width it is shown at.
pub(crate) const NARROW: Canvas = Canvas { w: 360, h: 340, text: 15, caption: 15, y_area: 62, narrow: true };

impl Canvas {
    /// The font of labels.
    pub(crate) fn font(&self) -> (&'static str, u32) {
        ("sans-serif", self.text)
    }
    /// Room under the plot for these category labels: turned on a phone
    /// when there are more than fit side by side, then as long as the
    /// longest (at most 150 px).
    pub(crate) fn x_area(&self, labels: &[String]) -> u32 {
        if self.rotate(labels.len()) {
            let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
            (16.0 + longest * f64::from(self.text) * 0.62).min(150.0) as u32
        } else {
            40
        }
    }
    /// A category label as drawn: turned labels are centred on their tick
    /// by plotters, so half of each would run up into the plot; padded
    /// before with as much blank (no-break spaces, which SVG keeps, about
    /// half a letter wide each) as the label is long, the visible half
    /// starts at the tick and runs down.
    pub(crate) fn x_label(&self, n: usize, label: &str) -> String {
        if self.rotate(n) {
            format!("{}{label}", "\u{a0}".repeat(2 * label.chars().count() + 2))
        } else {
            label.to_string()
        }
    }
    fn rotate(&self, n: usize) -> bool {
        self.narrow && n > 3
    }
    /// The style of `n` category labels under the plot.
    pub(crate) fn x_label_style(&self, n: usize) -> TextStyle<'static> {
        let f: TextStyle<'static> = ("sans-serif", f64::from(self.text)).into_font().into();
        if self.rotate(n) {
            f.transform(FontTransform::Rotate90)
        } else {
            f
        }
    }
}

pub(crate) type Point = (f64, f64);
/// A bar's (median, min, max), absent where the group lacks the step.
pub(crate) type Bar = Option<(f64, f64, f64)>;
/// A panel of a time chart: title, named series, and whether they are
/// shares stacked one on another (drawn as bands from zero) or lines.
pub(crate) type Panel = (String, Vec<(String, Vec<Point>)>, bool);

pub(crate) fn chart_err(title: &str) -> impl Fn(String) -> ReportError + '_ {
    move |e| ReportError::Chart(title.to_string(), e)
}

/// The drawing area a chart is drawn on: an SVG canvas.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Draws one chart as SVG text: a white canvas of `size` px handed to
/// `draw` with the chart's error (naming `title`), then finished. The
/// set-up and finish every chart of the report shares.
pub(crate) fn draw_svg(
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>, &dyn Fn(String) -> ReportError) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let e = chart_err(title);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        draw(&root, &e)?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(svg)
}

/// The x labels of categories drawn at 0, 1, 2, …: each category's label
/// (as `label` draws it) at its whole number, nothing between.
pub(crate) fn category_labels(
    labels: Vec<String>,
    label: impl Fn(&str) -> String,
) -> impl Fn(&f64) -> String {
    move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            labels.get(i as usize).map(|l| label(l)).unwrap_or_default()
        } else {
            String::new()
        }
    }
}

/// Every chart's legend: a boxed, lightly shaded key at `pos`.
pub(crate) fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
    size: u32,
    e: &dyn Fn(String) -> ReportError,
) -> Result<(), ReportError> {
    chart
        .configure_series_labels()
        .label_font(("sans-serif", size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(pos)
        .draw()
        .map_err(|x| e(x.to_string()))
}

pub(crate) fn color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

pub(crate) fn pad_range(lo: f64, hi: f64, from_zero: bool) -> (f64, f64) {
    let lo = if from_zero { lo.min(0.0) } else { lo };
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo <= f64::EPSILON {
        return (lo - 1.0, hi + 1.0);
    }
    (lo, hi + (hi - lo) * 0.08)
}

/// One series of a line chart: name, points (x, median), spreads (x, min, max).
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<Point>,
    pub spread: Vec<(f64, f64, f64)>,
}

/// A line chart of series against a numeric x, with min–max bars.
///
/// The x axis holds the load levels evenly spaced, labelled with their
/// values: 1, 10, 100 clients (S2) or 1, 2, 3, 5, … 89 users (S4) would
/// crowd the low levels together on a linear axis.
pub(crate) fn line_chart(
    cv: Canvas,
    title: &str,
    x_desc: &str,
    levels: &[String],
    y_desc: &str,
    series: &[Series],
) -> Result<String, ReportError> {
    let n = levels.len().max(1);
    let (x0, x1) = (-0.3, n as f64 - 0.7);
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1).chain(s.spread.iter().map(|p| p.2)));
    let y1 = ys.fold(f64::NEG_INFINITY, f64::max);
    let (y0, y1) = pad_range(0.0, y1, true);
    let fmt = category_labels(levels.to_vec(), str::to_string);
    draw_svg(title, (cv.w, cv.h), |root, e| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", cv.caption))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(cv.y_area)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .label_style(cv.font())
            .axis_desc_style(cv.font())
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&fmt)
            .x_desc(x_desc)
            .y_desc(y_desc)
            .y_label_formatter(&|v| fmt_num(*v))
            .draw()
            .map_err(|x| e(x.to_string()))?;
        for (i, s) in series.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(2)))
                .map_err(|x| e(x.to_string()))?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            chart
                .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(|x| e(x.to_string()))?;
            chart
                .draw_series(
                    s.spread
                        .iter()
                        .map(|(x, lo, hi)| PathElement::new(vec![(*x, *lo), (*x, *hi)], c.stroke_width(1))),
                )
                .map_err(|x| e(x.to_string()))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, cv.text, e)?;
        Ok(())
    })
}

/// Latency against percentile (named on x), log y: tails differ by orders
/// of magnitude between media.
pub(crate) fn percentile_lines(
    cv: Canvas,
    title: &str,
    names: &[String],
    y_desc: &str,
    series: &[Series],
) -> Result<String, ReportError> {
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|y| *y > 0.0);
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |a, y| (a.0.min(y), a.1.max(y)));
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { (lo * 0.7, hi * 1.6) } else { (1.0, 10.0) };
    let n = names.len().max(1);
    draw_svg(title, (cv.w, cv.h), |root, e| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", cv.caption))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(cv.y_area)
            .build_cartesian_2d(-0.2f64..(n as f64 - 0.8), (lo..hi).log_scale())
            .map_err(|x| e(x.to_string()))?;
        let fmt = category_labels(names.to_vec(), str::to_string);
        chart
            .configure_mesh()
            .label_style(cv.font())
            .axis_desc_style(cv.font())
            .x_labels(n)
            .x_label_formatter(&fmt)
            .y_label_formatter(&|v| fmt_num(*v))
            .x_desc("percentile")
            .y_desc(y_desc)
            .draw()
            .map_err(|x| e(x.to_string()))?;
        for (i, s) in series.iter().enumerate() {
            let c = color(i);
            let pts: Vec<Point> = s.points.iter().copied().filter(|p| p.1 > 0.0).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(|x| e(x.to_string()))?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(|x| e(x.to_string()))?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight, cv.text, e)?;
        Ok(())
    })
}

/// Grouped bars: one cluster per category, one bar per group, min–max whiskers.
pub(crate) fn bar_chart(
    cv: Canvas,
    title: &str,
    y_desc: &str,
    categories: &[String],
    groups: &[(String, Vec<Bar>)],
) -> Result<String, ReportError> {
    let n = categories.len().max(1);
    let y1 = groups.iter().flat_map(|g| g.1.iter().flatten().map(|v| v.2)).fold(f64::NEG_INFINITY, f64::max);
    let (y0, y1) = pad_range(0.0, y1, true);
    // Turned labels take their room below, not from the plot.
    let h = cv.h + cv.x_area(categories) - 40;
    draw_svg(title, (cv.w, h), |root, e| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", cv.caption))
            .margin(12)
            .x_label_area_size(cv.x_area(categories))
            .y_label_area_size(cv.y_area)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y0..y1)
            .map_err(|x| e(x.to_string()))?;
        let fmt = category_labels(categories.to_vec(), |c| cv.x_label(n, c));
        chart
            .configure_mesh()
            .label_style(cv.font())
            .x_label_style(cv.x_label_style(n))
            .axis_desc_style(cv.font())
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&fmt)
            .y_label_formatter(&|v| fmt_num(*v))
            .y_desc(y_desc)
            .draw()
            .map_err(|x| e(x.to_string()))?;
        let gn = groups.len().max(1) as f64;
        let width = 0.8 / gn;
        for (gi, (name, vals)) in groups.iter().enumerate() {
            let c = color(gi);
            let left = |ci: usize| ci as f64 - 0.4 + gi as f64 * width;
            chart
                .draw_series(vals.iter().enumerate().filter_map(|(ci, v)| {
                    v.map(|(med, _, _)| {
                        Rectangle::new([(left(ci), 0.0), (left(ci) + width * 0.9, med)], c.filled())
                    })
                }))
                .map_err(|x| e(x.to_string()))?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
            chart
                .draw_series(vals.iter().enumerate().filter_map(|(ci, v)| {
                    let (_, lo, hi) = (*v)?;
                    let mid = left(ci) + width * 0.45;
                    (hi > lo).then(|| PathElement::new(vec![(mid, lo), (mid, hi)], BLACK.stroke_width(2)))
                }))
                .map_err(|x| e(x.to_string()))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, cv.text, e)?;
        Ok(())
    })
}

/// Stacked panels sharing a time axis: each panel (title, y unit, series).
pub(crate) fn time_panels(
    cv: Canvas,
    title: &str,
    panels: &[Panel],
    steps: &[(f64, String)],
) -> Result<String, ReportError> {
    let ph = if cv.narrow { 200u32 } else { 230u32 };
    draw_svg(title, (cv.w, ph * panels.len() as u32 + 30), |root, e| {
        let root = root.titled(title, ("sans-serif", cv.caption)).map_err(|x| e(x.to_string()))?;
        let areas = root.split_evenly((panels.len(), 1));
        let t1 =
            panels.iter().flat_map(|p| p.1.iter().flat_map(|s| s.1.iter().map(|x| x.0))).fold(1.0, f64::max);
        for (pi, (area, (ptitle, series, stacked))) in areas.iter().zip(panels).enumerate() {
            let y1 = series.iter().flat_map(|s| s.1.iter().map(|x| x.1)).fold(f64::NEG_INFINITY, f64::max);
            let (y0, y1) = if *stacked { (0.0, 100.0) } else { pad_range(0.0, y1, true) };
            let mut chart = ChartBuilder::on(area)
                .margin(8)
                .x_label_area_size(if cv.narrow { 44 } else { 36 })
                .y_label_area_size(cv.y_area)
                .build_cartesian_2d(0.0..t1, y0..y1)
                .map_err(|x| e(x.to_string()))?;
            chart
                .configure_mesh()
                .label_style(cv.font())
                .axis_desc_style(cv.font())
                .x_desc("seconds")
                .y_desc(ptitle.as_str())
                .y_label_formatter(&|v| fmt_num(*v))
                .draw()
                .map_err(|x| e(x.to_string()))?;
            // Where each step begins; its label on the first panel.
            chart
                .draw_series(steps.iter().map(|(x, _)| {
                    PathElement::new(vec![(*x, y0), (*x, y1)], RGBColor(120, 120, 120).stroke_width(1))
                }))
                .map_err(|x| e(x.to_string()))?;
            if pi == 0 {
                chart
                    .draw_series(
                        steps
                            .iter()
                            .map(|(x, l)| Text::new(format!(" {l}"), (*x, y1), ("sans-serif", cv.text - 1))),
                    )
                    .map_err(|x| e(x.to_string()))?;
            }
            if *stacked {
                stacked_bands(&mut chart, series, e)?;
                legend(&mut chart, SeriesLabelPosition::UpperRight, cv.text, e)?;
                continue;
            }
            for (i, (name, pts)) in series.iter().enumerate() {
                let c = color(i);
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(|x| e(x.to_string()))?
                    .label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight, cv.text, e)?;
        }
        Ok(())
    })
}

/// Shares (in %) stacked from zero, the first series at the bottom: each
/// drawn as the area under the running sum up to it, the largest sum first
/// so the smaller ones paint over it. Points of the same second line up
/// across series (every series has every second, zeros included).
pub(crate) fn stacked_bands<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<
        'a,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    series: &[(String, Vec<Point>)],
    e: &dyn Fn(String) -> ReportError,
) -> Result<(), ReportError> {
    let mut sums: Vec<Vec<Point>> = Vec::with_capacity(series.len());
    for (i, (_, pts)) in series.iter().enumerate() {
        let below = i.checked_sub(1).map(|j| sums[j].clone());
        sums.push(
            pts.iter()
                .enumerate()
                .map(|(k, p)| (p.0, p.1 + below.as_ref().and_then(|b| b.get(k)).map_or(0.0, |b| b.1)))
                .collect(),
        );
    }
    for (i, (name, _)) in series.iter().enumerate().rev() {
        let c = color(i);
        chart
            .draw_series(AreaSeries::new(sums[i].clone(), 0.0, c.mix(0.85).filled()))
            .map_err(|x| e(x.to_string()))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], c.filled()));
    }
    Ok(())
}

/// A chart in both its drawings (desktop and phone: CSS shows one), with
/// its caption.
pub(crate) fn figure(out: &mut String, caption: &str, wide: &str, narrow: &str) {
    let _ = writeln!(
        out,
        "<figure class=\"chart\"><div class=\"wide\">{wide}</div><div class=\"narrow\">{narrow}</div><figcaption>{}</figcaption></figure>",
        esc_html(caption)
    );
}

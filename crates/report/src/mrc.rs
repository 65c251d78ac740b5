//! Miss-ratio curves as a self-contained HTML page with one SVG chart
//! (plotters): miss ratio against cache size on a log2 axis, one line per
//! policy, the knee marked. Knows nothing of traces or policies: it draws
//! labelled points the `cache` command hands it, and only builds a string.

use plotters::prelude::*;

use crate::chart::{color, draw_svg, legend};
use crate::table::esc_html;
use crate::ReportError;

/// One curve: (cache size in bytes, miss ratio) points and its knee.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// (bytes, miss ratio in [0, 1]), ascending sizes.
    pub points: Vec<(u64, f64)>,
    /// The knee's size in bytes, marked with a ring.
    pub knee: Option<u64>,
}

fn bytes_label(b: f64) -> String {
    for (u, m) in [("T", 1u64 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if b >= m as f64 {
            let v = b / m as f64;
            return if (v - v.round()).abs() < 0.01 { format!("{:.0}{u}", v) } else { format!("{v:.1}{u}") };
        }
    }
    format!("{b:.0}")
}

/// The chart as an SVG string, drawn for a desktop.
pub fn svg(title: &str, series: &[Series]) -> Result<String, ReportError> {
    svg_on(crate::chart::WIDE, title, series)
}

/// The chart drawn on canvas `c` (a desktop's or a phone's, as the report's
/// other charts: a phone's at the width it is shown at, so its text keeps
/// its size).
fn svg_on(c: crate::chart::Canvas, title: &str, series: &[Series]) -> Result<String, ReportError> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0 as f64)).filter(|x| *x > 0.0);
    let (x0, x1) = xs.fold((f64::INFINITY, 0f64), |a, x| (a.0.min(x), a.1.max(x)));
    let (x0, x1) = if x0.is_finite() && x1 > x0 { (x0, x1) } else { (1.0, 2.0) };
    draw_svg(title, (c.w, c.h + 40), |root, e| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", c.caption))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(c.y_area)
            .build_cartesian_2d((x0..x1).log_scale(), 0f64..1f64)
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("cache size")
            .y_desc("miss ratio")
            .x_label_formatter(&|v| bytes_label(*v))
            .x_labels(if c.narrow { 5 } else { 10 })
            .label_style(c.font())
            .axis_desc_style(c.font())
            .draw()
            .map_err(|x| e(x.to_string()))?;
        for (i, s) in series.iter().enumerate() {
            let col = color(i);
            let pts: Vec<(f64, f64)> =
                s.points.iter().filter(|p| p.0 > 0).map(|&(x, y)| (x as f64, y)).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
                .map_err(|x| e(x.to_string()))?
                .label(s.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
            if let Some(k) = s.knee {
                let y = pts.iter().find(|p| p.0 >= k as f64).map_or(0.0, |p| p.1);
                chart
                    .draw_series(std::iter::once(Circle::new((k as f64, y), 6, col.stroke_width(2))))
                    .map_err(|x| e(x.to_string()))?;
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, c.text, e)?;
        Ok(())
    })
}

/// A whole page: title, the chart, then `notes` as a list (method, knee,
/// target size).
pub fn html(title: &str, series: &[Series], notes: &[String]) -> Result<String, ReportError> {
    let (wide, narrow) = (svg(title, series)?, svg_on(crate::chart::NARROW, title, series)?);
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{t}</title>\
<style>body{{font-family:sans-serif;margin:24px;color:#222}}\
figure.chart svg{{max-width:100%;height:auto}}figure.chart .narrow{{display:none}}\
@media (max-width:600px){{body{{margin:8px}}figure.chart .wide{{display:none}}figure.chart .narrow{{display:block}}}}\
</style></head><body>\n<h1>{t}</h1>\n",
        t = esc_html(title)
    );
    crate::chart::figure(&mut page, "Rings mark each curve's knee.", &wide, &narrow);
    page.push_str("<ul>\n");
    for n in notes {
        page.push_str(&format!("<li>{}</li>\n", esc_html(n)));
    }
    page.push_str("</ul>\n</body></html>\n");
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_the_chart_the_legend_and_escaped_notes() {
        let s = vec![Series {
            label: "lru (stack-distance)".into(),
            points: vec![(1 << 20, 0.9), (2 << 20, 0.5), (4 << 20, 0.1)],
            knee: Some(2 << 20),
        }];
        let page = html("curves <x>", &s, &["knee: lru at 2m".into()]).unwrap();
        assert_eq!(page.matches("<svg").count(), 2, "a desktop's drawing and a phone's");
        assert!(page.contains("<div class=\"narrow\"><svg width=\"360\""), "the phone's at its width");
        assert!(page.contains("@media (max-width:600px)"));
        assert!(page.contains("lru (stack-distance)"));
        assert!(page.contains("curves &lt;x&gt;"));
        assert!(page.contains("<li>knee: lru at 2m</li>"));
        assert_eq!(bytes_label(2.0 * (1u64 << 30) as f64), "2G");
        assert_eq!(bytes_label(1.5 * (1u64 << 20) as f64), "1.5M");
    }
}

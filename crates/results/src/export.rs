//! Export of a run as one JSON document (the run record `--json` prints) or as
//! CSV rows of its figures.

use serde::Serialize;

use crate::store::{MetricRow, RunRow, SampleRow, StepRow, Store, StoreError};

/// One step with its figures and samples.
#[derive(Debug, Serialize)]
pub struct StepExport {
    /// The step row.
    #[serde(flatten)]
    pub step: StepRow,
    /// Its summary figures: name → {value, unit}.
    pub metrics: serde_json::Map<String, serde_json::Value>,
    /// Its per-second samples.
    pub samples: Vec<SampleRow>,
    /// Its text notes: name → text (`verdict.kind`, `verdict.evidence`);
    /// left out of the record when the step has none.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub notes: serde_json::Map<String, serde_json::Value>,
}

/// A whole run: what `storbench results export --json` and `--json` print.
#[derive(Debug, Serialize)]
pub struct RunExport {
    /// The run row.
    pub run: RunRow,
    /// Its steps in order.
    pub steps: Vec<StepExport>,
}

impl Store {
    /// Everything recorded for run `key` (id or uuid prefix).
    pub fn export(&self, key: &str) -> Result<RunExport, StoreError> {
        let run = self.run(key)?;
        let metrics = self.metrics(run.id)?;
        let samples = self.samples(run.id)?;
        let notes = self.notes(run.id)?;
        let steps = self
            .steps(run.id)?
            .into_iter()
            .map(|step| {
                let mut m = serde_json::Map::new();
                for x in metrics.iter().filter(|x| x.step_idx == step.idx) {
                    m.insert(x.name.clone(), serde_json::json!({"value": x.value, "unit": x.unit}));
                }
                let s = samples.iter().filter(|x| x.step_idx == step.idx).cloned().collect();
                let n = notes
                    .iter()
                    .filter(|x| x.step_idx == step.idx)
                    .map(|x| (x.name.clone(), serde_json::Value::String(x.text.clone())))
                    .collect();
                StepExport { step, metrics: m, samples: s, notes: n }
            })
            .collect();
        Ok(RunExport { run, steps })
    }

    /// The figures of run `key` as CSV: one row per step and figure.
    pub fn export_csv(&self, key: &str) -> Result<String, StoreError> {
        let run = self.run(key)?;
        let steps = self.steps(run.id)?;
        let mut out = String::from("run_uuid,kind,step_idx,step_label,name,value,unit\n");
        for MetricRow { step_idx, name, value, unit } in self.metrics(run.id)? {
            let label = steps.iter().find(|s| s.idx == step_idx).map(|s| s.label.as_str()).unwrap_or("");
            out.push_str(&format!(
                "{},{},{},{},{},{},{}\n",
                run.uuid,
                csv_field(&run.kind),
                step_idx,
                csv_field(label),
                csv_field(&name),
                value,
                csv_field(&unit)
            ));
        }
        Ok(out)
    }
}

/// Quotes a CSV field when it holds a separator, quote or line break
/// (RFC 4180): the one CSV quoting every storbench export uses.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("users=8"), "users=8");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("a\r\nb"), "\"a\r\nb\"");
    }
}

//! An array's members in the report: built on a real results store holding
//! an I/O run on a RAID 5 of 4 whose member 2 was the busiest (a parity
//! bottleneck's shape), and one on a plain medium that has no member table.

use serde_json::json;
use storbench_metrics::{StepReport, Unit};
use storbench_report::Report;
use storbench_results::{now_rfc3339, NewRun, Status, Store};

/// A directory of its own for the test's store, removed when dropped.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(store: &mut Store, target: &str, step: StepReport) {
    let r = store
        .begin_run(&NewRun {
            kind: "io".into(),
            label: format!("target={target}"),
            config: json!({ "axes": { "target": target } }),
            env: json!({ "host": "h" }),
            plan: Some("arrays".into()),
            cell: Some(format!("target={target}/io#r1")),
        })
        .unwrap();
    store.write_step(r.id, 0, "randwrite", &json!({}), &now_rfc3339(), &now_rfc3339(), &step).unwrap();
    store.finish_run(r.id, Status::Complete).unwrap();
}

#[test]
fn the_report_shows_what_the_layout_did_at_the_members_and_the_hottest() {
    let dir = Dir(std::env::temp_dir().join(format!("storbench-report-array-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut st = Store::open(dir.0.join("r.db")).unwrap();
    // 1,000 host writes/s on a RAID 5 of 4: 2,000 member reads and 2,000
    // member writes; member 2 at 90 % busy, the others at 40 %.
    let mut s = StepReport::default();
    s.figure("iops", 1000.0, Unit::PerS);
    s.figure("emu.r5.write.iops", 1000.0, Unit::PerS);
    s.figure("emu.r5.read.iops", 0.0, Unit::PerS);
    for i in 0..4 {
        let busy = if i == 2 { 0.9 } else { 0.4 };
        s.figure(format!("emu.r5.member.{i}.reads"), 500.0, Unit::PerS);
        s.figure(format!("emu.r5.member.{i}.writes"), 500.0, Unit::PerS);
        s.figure(format!("emu.r5.member.{i}.busy"), busy, Unit::Ratio);
        s.figure(format!("emu.r5.member.{i}.queue"), busy * 4.0, Unit::Count);
    }
    s.figure("emu.r5.member.busy.max", 0.9, Unit::Ratio);
    s.figure("emu.r5.member.busy.mean", 0.525, Unit::Ratio);
    s.figure("emu.r5.array.failed", 0.0, Unit::Count);
    run(&mut st, "r5", s);
    let mut plain = StepReport::default();
    plain.figure("iops", 5000.0, Unit::PerS);
    run(&mut st, "ssd", plain);

    let r = Report::load(&st, &["arrays".into()]).unwrap();
    let text = r.to_text();
    let at = text.find("array members: what the layout did").unwrap_or_else(|| panic!("{text}"));
    let table = &text[at..];
    let table = &table[..table.find("\n\n").unwrap_or(table.len())];
    let row = table
        .lines()
        .find(|l| l.contains("r5") && l.contains("randwrite"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split(['│', '┆']).map(str::trim).filter(|c| !c.is_empty()).collect();
    // configuration, step, array, members, reads/s, writes/s, per I/O, busy mean, max, busiest (queue), failed
    assert_eq!(cells[2..], ["r5", "4", "2000", "2000", "4.00", "52 %", "90 %", "2 (3.6)", "–"], "{row}");
    assert!(!table.contains("target=ssd"), "a medium without members has no row: {table}");
    assert!(r.to_html().unwrap().contains("array members: what the layout did"));
}

//! The checks of a plan's targets before anything runs: a path target must
//! exist or be creatable; a medium needs what `storbench media create`
//! needs (root, loop support, the throttle or the emulator), and its array,
//! model and cache tier must be ones the emulator accepts. It creates
//! nothing.

use std::path::Path;

use storbench_plan::{MediaDef, Plan};

use super::PlanError;

type Result<T> = std::result::Result<T, PlanError>;

/// Path targets must exist or be creatable; media need root.
pub fn validate_targets(plan: &Plan) -> Result<()> {
    let file = plan.file.display();
    for (name, t) in &plan.def.targets {
        let t = t.get_ref();
        if let Some(p) = &t.path {
            let p = Path::new(p);
            let parent_ok =
                p.exists() || p.parent().map(|d| d.as_os_str().is_empty() || d.exists()).unwrap_or(false);
            if !parent_ok {
                return Err(PlanError::Usage(format!(
                    "{file}: target '{name}': {} does not exist (and neither does its parent)",
                    p.display()
                )));
            }
        }
        if let Some(m) = &t.media {
            validate_medium(plan, name, m)?;
        }
    }
    Ok(())
}

/// A medium the plan creates, as target `name`.
fn validate_medium(plan: &Plan, name: &str, m: &MediaDef) -> Result<()> {
    let file = plan.file.display();
    // The same check `storbench media create` makes (root, loop
    // support, and the throttle when a class is emulated).
    let throttled = m.emulate.as_deref().is_some_and(|c| c != "nvme");
    storbench_media::check_support(throttled).map_err(|e| {
        PlanError::Usage(format!("{file}: target '{name}' is a medium the plan creates: {e}"))
    })?;
    let bad = |e: String| PlanError::Usage(format!("{file}: target '{name}': {e}"));
    let modelled = |e: storbench_media::MediaError| {
        PlanError::Usage(format!("{file}: target '{name}' is a modelled medium: {e}"))
    };
    if let Some(layout) = m.array.as_deref() {
        if m.model.is_some() || m.emulate.is_some() {
            return Err(bad("give array or model or emulate, one of them".into()));
        }
        let sets: Vec<String> = m.member_set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let o = array_options(m, layout, &sets).map_err(bad)?;
        let array = storbench_emu::ArraySpec::from_options(&o).map_err(|e| bad(e.to_string()))?;
        if !m.set.is_empty() {
            return Err(bad("an array's members take member_set = { ... }, not set".into()));
        }
        // A cache tier in front of the array (S1's flash card before its RAID 0).
        if let Some(o) = tier_options(m).map_err(bad)? {
            let spec = storbench_emu::Spec {
                base: "array".into(),
                array: Some(array),
                cache: Some(storbench_emu::TierSpec::from_options(&o)),
                ..Default::default()
            };
            let size = storbench_metrics::units::parse_size(&m.size)
                .map_err(|e| bad(format!("size = \"{}\": {e}", m.size)))?;
            spec.build(size).map_err(|e| bad(e.to_string()))?;
        } else if m.has_tier_keys() {
            return Err(bad("cache_model, cache_policy, cache_write, cache_line, cache_warm and cold need cache = \"SIZE\"".into()));
        }
        storbench_media::emu::check_support().map_err(modelled)?;
        return Ok(());
    }
    if m.model.is_some() || !m.set.is_empty() || m.wants_model() {
        let model = m
            .model
            .as_deref()
            .ok_or_else(|| bad("set = { ... }, cache and trace need model = \"NAME\"".into()))?;
        if m.emulate.is_some() {
            return Err(bad("give emulate or model, not both (caps, or a per-I/O device model)".into()));
        }
        let sets: Vec<String> = m.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut spec = storbench_emu::Spec::parse(model, &sets).map_err(|e| bad(e.to_string()))?;
        if let Some(o) = tier_options(m).map_err(bad)? {
            spec.cache = Some(storbench_emu::TierSpec::from_options(&o));
            let size = storbench_metrics::units::parse_size(&m.size)
                .map_err(|e| bad(format!("size = \"{}\": {e}", m.size)))?;
            spec.build(size).map_err(|e| bad(e.to_string()))?;
        } else if m.has_tier_keys() {
            return Err(bad("cache_model, cache_policy, cache_write, cache_line, cache_warm and cold need cache = \"SIZE\"".into()));
        }
        storbench_media::emu::check_support().map_err(modelled)?;
    }
    Ok(())
}

/// A plan medium's array options (the defaults are
/// `ArraySpec::from_options`'s, as for `media create`): sizes, the battery
/// and the destage parsed, a bad one named as the plan writes it
/// (`chunk = "48q"`).
pub fn array_options<'a>(
    m: &'a MediaDef,
    layout: &'a str,
    member_sets: &'a [String],
) -> std::result::Result<storbench_emu::ArrayOptions<'a>, String> {
    fn parsed<T>(
        key: &str,
        v: Option<&str>,
        parse: fn(&str) -> std::result::Result<T, String>,
    ) -> std::result::Result<Option<T>, String> {
        v.map(|v| parse(v).map_err(|e| format!("{key} = \"{v}\": {e}"))).transpose()
    }
    let size = storbench_metrics::units::parse_size;
    Ok(storbench_emu::ArrayOptions {
        layout,
        disks: m.disks,
        chunk: parsed("chunk", m.chunk.as_deref(), size)?,
        groups: m.groups,
        member: m.member.as_deref(),
        member_sets,
        link: m.member_link.as_deref(),
        cache: parsed("controller_cache", m.controller_cache.as_deref(), size)?,
        battery: parsed("cache_battery", m.cache_battery.as_deref(), storbench_emu::parse_battery)?,
        destage: parsed("controller_destage", m.controller_destage.as_deref(), storbench_emu::parse_destage)?,
    })
}

/// A plan medium's cache tier options, if it has `cache` (the defaults are
/// `TierSpec::from_options`'s, as for `media create`); its sizes parsed, a
/// bad one named as the plan writes it (`cache = "lots"`).
pub fn tier_options(m: &MediaDef) -> std::result::Result<Option<storbench_emu::TierOptions<'_>>, String> {
    let Some(size) = m.cache.as_deref() else { return Ok(None) };
    let parse = |key: &str, v: &str| {
        storbench_metrics::units::parse_size(v).map_err(|e| format!("{key} = \"{v}\": {e}"))
    };
    Ok(Some(storbench_emu::TierOptions {
        size: parse("cache", size)?,
        model: m.cache_model.as_deref(),
        line: m.cache_line.as_deref().map(|l| parse("cache_line", l)).transpose()?,
        policy: m.cache_policy.as_deref(),
        write: m.cache_write.as_deref(),
        warm: m.cache_warm.as_deref(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_medium_s_cache_sizes_are_parsed_and_a_bad_one_named_as_written() {
        let def = |t: &str| -> MediaDef { toml::from_str(t).unwrap() };
        let m = def("size = \"1G\"\ncache = \"64M\"\ncache_line = \"128k\"");
        let o = tier_options(&m).unwrap().unwrap();
        assert_eq!((o.size, o.line), (64 << 20, Some(128 << 10)));
        let m = def("size = \"1G\"\ncache = \"64M\"");
        assert_eq!(tier_options(&m).unwrap().unwrap().line, None);
        assert!(tier_options(&def("size = \"1G\"")).unwrap().is_none());
        let e = tier_options(&def("size = \"1G\"\ncache = \"64M\"\ncache_line = \"lots\"")).unwrap_err();
        assert!(e.starts_with("cache_line = \"lots\": "), "{e}");
    }

    #[test]
    fn a_plan_array_s_sizes_battery_and_destage_are_parsed_and_a_bad_one_named_as_written() {
        let def = |t: &str| -> MediaDef {
            toml::from_str(&format!("size = \"1G\"\narray = \"raid5\"\n{t}")).unwrap()
        };
        let m = def("chunk = \"128k\"\ncontroller_cache = \"1G\"\ncache_battery = \"off\"\ncontroller_destage = \"full\"");
        let o = array_options(&m, "raid5", &[]).unwrap();
        assert_eq!(
            (o.chunk, o.cache, o.battery, o.destage),
            (Some(128 << 10), Some(1 << 30), Some(false), Some(storbench_emu::Destage::Full))
        );
        for (t, want) in [
            ("chunk = \"48q\"", "chunk = \"48q\": "),
            ("controller_cache = \"big\"", "controller_cache = \"big\": "),
            ("cache_battery = \"maybe\"", "cache_battery = \"maybe\": 'maybe': use on or off"),
            ("controller_destage = \"never\"", "controller_destage = \"never\": 'never': use idle or full"),
        ] {
            let m = def(t);
            let e = array_options(&m, "raid5", &[]).unwrap_err();
            assert!(e.starts_with(want), "{t}: {e}");
        }
    }
}

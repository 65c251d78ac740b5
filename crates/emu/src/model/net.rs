//! Network storage: a round trip and a shared link in front of a device
//! model (the NAS's or array's own disks). A request pays the round trip,
//! its payload's time on the link (queued behind other payloads), then the
//! backing device's service time.

use std::time::Duration;

use super::{xfer, Builtin, Kind, Model, ModelError, Op, Param, Params, Req, State};

pub(crate) const GBE_NAS: Builtin = Builtin {
    name: "gbe-nas",
    about: "a NAS over 1 GbE: 0.2 ms round trip, 117 MB/s link, a 7,200 rpm disk behind it",
    params: &[
        Param { key: "rtt", default: "0.2ms", kind: Kind::Dur, doc: "round trip through the LAN and the NAS's protocol stack (0.1-0.3 ms for NFS/iSCSI on a switched LAN)" },
        Param { key: "link_rate", default: "117MB/s", kind: Kind::Rate, doc: "1 GbE payload rate after Ethernet/IP/TCP framing (REFERENCE: ~110 MB/s seen)" },
        Param { key: "backing", default: "hdd", kind: Kind::Name, doc: "the device behind the link; set its parameters with backing.KEY=VALUE" },
    ],
};

pub(crate) const FC_SAN: Builtin = Builtin {
    name: "fc-san",
    about: "a SAN over 8 Gb Fibre Channel: 0.1 ms round trip, 800 MB/s link, a protected flash array behind it",
    params: &[
        Param { key: "rtt", default: "0.1ms", kind: Kind::Dur, doc: "fabric plus array controller round trip" },
        Param { key: "link_rate", default: "800MB/s", kind: Kind::Rate, doc: "8GFC payload rate (800 MB/s per direction)" },
        Param { key: "backing", default: "nvme", kind: Kind::Name, doc: "the array behind the link (battery- or flash-protected cache: acknowledged writes are durable)" },
    ],
};

/// A network model.
#[derive(Clone, Debug)]
pub struct Net {
    /// Round trip.
    pub rtt: Duration,
    /// Link rate, bytes/s.
    pub link_rate: f64,
    /// The device behind it.
    pub backing: Model,
}

impl Net {
    pub(crate) fn from_params(p: &Params, capacity: u64) -> Result<Net, ModelError> {
        Ok(Net { rtt: p.dur("rtt"), link_rate: p.rate("link_rate"), backing: p.backing(capacity)? })
    }

    pub(crate) fn service_time(&self, r: &Req, st: &mut State, start_ns: u64) -> Duration {
        let half = self.rtt.as_nanos() as u64 / 2;
        // Writes carry their payload out, reads bring it back; both queue on the link.
        let payload =
            if matches!(r.op, Op::Read | Op::Write) { xfer(r.len, self.link_rate) } else { Duration::ZERO };
        let begin = st.net_free_ns.max(start_ns + half);
        st.net_free_ns = begin + payload.as_nanos() as u64;
        let at_device = st.net_free_ns;
        let dev = self.backing.service_time(r, st, at_device);
        Duration::from_nanos(at_device - start_ns + half) + dev
    }
}

#[cfg(test)]
mod tests {
    use super::super::Spec;
    use super::*;

    #[test]
    fn a_request_pays_round_trip_link_and_device() {
        let spec = Spec::parse(
            "gbe-nas",
            &["rtt=0.5ms".into(), "backing=constant".into(), "backing.read=1ms".into()],
        )
        .unwrap();
        let m = spec.build(1 << 30).unwrap();
        let mut st = State::default();
        let d = m.service_time(&Req { op: Op::Read, offset: 0, len: 117_000 }, &mut st, 0);
        assert_eq!(d, Duration::from_micros(500 + 1000 + 1000));
        // A second one started at once queues behind the first payload on the link.
        let d2 = m.service_time(&Req { op: Op::Read, offset: 0, len: 117_000 }, &mut st, 0);
        assert_eq!(d2, Duration::from_micros(500 + 2000 + 1000));
        assert_eq!(m.units(), 32);
    }
}

//! Network storage: a round trip and a shared link in front of a device
//! model (the NAS's or array's own disks: a built-in device through the
//! `backing` parameter, or an array of them, [`super::Spec::array`], as an
//! iSCSI NAS exports its RAID 0). A request pays half the round
//! trip and its payload's time on the link (queued behind other payloads)
//! on its way to the device ([`Net::approach`]), the backing device's
//! service time on one of the device's units ([`Net::service_time`]), and
//! the other half of the round trip on its way back ([`Net::back`]). The
//! round trip is latency only: while a request travels, the device serves
//! others, so network time overlaps disk time as it does on a real NAS.

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
    /// The device behind it (an array too).
    pub backing: Model,
}

impl Net {
    pub(crate) fn from_params(p: &Params, capacity: u64) -> Result<Net, ModelError> {
        Ok(Net::in_front_of(p, p.backing(capacity)?))
    }

    /// The network of `p` (its round trip and link) in front of `backing`
    /// instead of the device its `backing` parameter names.
    pub(crate) fn in_front_of(p: &Params, backing: Model) -> Net {
        Net { rtt: p.dur("rtt"), link_rate: p.rate("link_rate"), backing }
    }

    /// When a request that left the host at `arrival_ns` reaches the
    /// device: half the round trip, then its payload on the shared link,
    /// after the payloads ahead of it. (Writes carry their payload out,
    /// reads bring it back; both are charged here, on one link, so the
    /// link's queueing is in arrival order.)
    pub(crate) fn approach(&self, r: &Req, st: &mut State, arrival_ns: u64) -> u64 {
        let half = self.rtt.as_nanos() as u64 / 2;
        let payload =
            if matches!(r.op, Op::Read | Op::Write) { xfer(r.len, self.link_rate) } else { Duration::ZERO };
        let begin = st.net_free_ns.max(arrival_ns + half);
        st.net_free_ns = begin + payload.as_nanos() as u64;
        st.net_free_ns
    }

    /// The device's own time: what occupies one of its units.
    pub(crate) fn service_time(&self, r: &Req, st: &mut State, start_ns: u64) -> Duration {
        self.backing.service_time(r, st, start_ns)
    }

    /// The way back: the other half of the round trip.
    pub(crate) fn back(&self) -> Duration {
        self.rtt - self.rtt / 2
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
        let r = Req { op: Op::Read, offset: 0, len: 117_000 };
        assert_eq!(m.idle_latency(&r), Duration::from_micros(500 + 1000 + 1000));
        let mut st = State::default();
        // Half the round trip, then 1 ms of payload on the link.
        assert_eq!(m.approach(&r, &mut st, 0), 1_250_000);
        // A second one sent at once queues behind the first payload on the link.
        assert_eq!(m.approach(&r, &mut st, 0), 2_250_000);
        // The device's unit is busy for the device's time only.
        assert_eq!(m.service_time(&r, &mut st, 2_250_000), Duration::from_millis(1));
        assert_eq!(m.back(&r), Duration::from_micros(250));
        assert_eq!(m.units(), 32);
    }
}

//! MLDv2 listener reports (RFC 3810 section 5.2), carried in ICMPv6.
//!
//! A host sends its reports to ff02::16 ([`crate::IPV6_ALL_MLDV2_ROUTERS`])
//! with hop limit 1, from a link-local address (or the unspecified one
//! before it has one), behind a hop-by-hop header holding a Router Alert
//! of 0 (RFC 3810 section 5); those are IPv6 matters, outside this view.

use core::net::Ipv6Addr;

use crate::error::{Error, Result};
use crate::field;
use crate::icmpv6::{Icmpv6Message, Icmpv6Packet, ICMPV6_HEADER_LEN};

/// Type, code, checksum, reserved, number of records.
pub const MLD_REPORT_HEADER_LEN: usize = ICMPV6_HEADER_LEN;
/// Record type, aux data length, number of sources, multicast address.
pub const MLD_RECORD_HEADER_LEN: usize = 20;

mod offs {
    // Report.
    pub const NUM_RECORDS: usize = 6;
    // Record.
    pub const RECORD_TYPE: usize = 0;
    pub const AUX_LEN: usize = 1;
    pub const NUM_SOURCES: usize = 2;
    pub const MCAST_ADDR: usize = 4;
}

const SOURCE_LEN: usize = 16;
const AUX_UNIT: usize = 4;

/// Multicast address record types (RFC 3810 section 5.2.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MldRecordType {
    /// 1: current state, include the sources.
    ModeIsInclude,
    /// 2: current state, exclude the sources.
    ModeIsExclude,
    /// 3: filter mode changed to include.
    ChangeToInclude,
    /// 4: filter mode changed to exclude.
    ChangeToExclude,
    /// 5
    AllowNewSources,
    /// 6
    BlockOldSources,
    /// Anything else (never 1..=6); receivers ignore such records.
    Unknown(u8),
}

impl From<u8> for MldRecordType {
    fn from(v: u8) -> Self {
        match v {
            1 => MldRecordType::ModeIsInclude,
            2 => MldRecordType::ModeIsExclude,
            3 => MldRecordType::ChangeToInclude,
            4 => MldRecordType::ChangeToExclude,
            5 => MldRecordType::AllowNewSources,
            6 => MldRecordType::BlockOldSources,
            other => MldRecordType::Unknown(other),
        }
    }
}

impl From<MldRecordType> for u8 {
    fn from(v: MldRecordType) -> Self {
        match v {
            MldRecordType::ModeIsInclude => 1,
            MldRecordType::ModeIsExclude => 2,
            MldRecordType::ChangeToInclude => 3,
            MldRecordType::ChangeToExclude => 4,
            MldRecordType::AllowNewSources => 5,
            MldRecordType::BlockOldSources => 6,
            MldRecordType::Unknown(other) => other,
        }
    }
}

/// One multicast address record of a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MldAddressRecord<'a> {
    /// Record type.
    pub record_type: MldRecordType,
    /// The multicast address the record is about.
    pub multicast_addr: Ipv6Addr,
    /// Source addresses, 16 bytes each (read with
    /// [`MldAddressRecord::sources`]).
    pub sources: &'a [u8],
    /// Auxiliary data, a multiple of 4 bytes (none defined by RFC 3810).
    pub aux_data: &'a [u8],
}

impl<'a> MldAddressRecord<'a> {
    /// Joining `group` from a host that filters no source: a change to
    /// exclude nothing (RFC 3810 section 6.1).
    pub const fn join(group: Ipv6Addr) -> Self {
        MldAddressRecord {
            record_type: MldRecordType::ChangeToExclude,
            multicast_addr: group,
            sources: &[],
            aux_data: &[],
        }
    }

    /// Leaving `group`: a change to include nothing.
    pub const fn leave(group: Ipv6Addr) -> Self {
        MldAddressRecord {
            record_type: MldRecordType::ChangeToInclude,
            multicast_addr: group,
            sources: &[],
            aux_data: &[],
        }
    }

    /// Parse the record at the start of `buf`, returning the bytes after it.
    /// `Err(Truncated)` if the record's header, sources or aux data run past
    /// the end of `buf`.
    pub fn parse(buf: &'a [u8]) -> Result<(&'a [u8], Self)> {
        if buf.len() < MLD_RECORD_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let sources_len = usize::from(field::u16_at(buf, offs::NUM_SOURCES)) * SOURCE_LEN;
        let aux_len = usize::from(field::u8_at(buf, offs::AUX_LEN)) * AUX_UNIT;
        let sources_end = MLD_RECORD_HEADER_LEN + sources_len;
        let end = sources_end + aux_len;
        let sources = buf.get(MLD_RECORD_HEADER_LEN..sources_end).ok_or(Error::Truncated)?;
        let aux_data = buf.get(sources_end..end).ok_or(Error::Truncated)?;
        let rest = buf.get(end..).ok_or(Error::Truncated)?;
        let record = MldAddressRecord {
            record_type: MldRecordType::from(field::u8_at(buf, offs::RECORD_TYPE)),
            multicast_addr: field::ipv6_at(buf, offs::MCAST_ADDR),
            sources,
            aux_data,
        };
        Ok((rest, record))
    }

    /// The source addresses.
    pub fn sources(&self) -> impl Iterator<Item = Ipv6Addr> + 'a {
        self.sources.chunks_exact(SOURCE_LEN).filter_map(|c| c.first_chunk::<16>().map(|a| Ipv6Addr::from(*a)))
    }

    /// Bytes [`MldAddressRecord::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        MLD_RECORD_HEADER_LEN + self.sources.len() + self.aux_data.len()
    }

    /// Write the record at the start of `buf` and return the rest of `buf`.
    ///
    /// `Err(Malformed)` if `sources` is not a whole number of addresses or
    /// more than 65535 of them, or `aux_data` is not a whole number of
    /// 4-byte words or more than 255 of them; `Err(Truncated)` if `buf` is
    /// too short.
    pub fn emit<'b>(&self, buf: &'b mut [u8]) -> Result<&'b mut [u8]> {
        if !self.sources.len().is_multiple_of(SOURCE_LEN) || !self.aux_data.len().is_multiple_of(AUX_UNIT) {
            return Err(Error::Malformed);
        }
        let num_sources = u16::try_from(self.sources.len() / SOURCE_LEN).map_err(|_| Error::Malformed)?;
        let aux_len = u8::try_from(self.aux_data.len() / AUX_UNIT).map_err(|_| Error::Malformed)?;
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let (out, rest) = buf.split_at_mut(len);
        field::set_u8(out, offs::RECORD_TYPE, self.record_type.into());
        field::set_u8(out, offs::AUX_LEN, aux_len);
        field::set_u16(out, offs::NUM_SOURCES, num_sources);
        field::set_bytes(out, offs::MCAST_ADDR, &self.multicast_addr.octets());
        field::set_bytes(out, MLD_RECORD_HEADER_LEN, self.sources);
        field::set_bytes(out, MLD_RECORD_HEADER_LEN + self.sources.len(), self.aux_data);
        Ok(rest)
    }
}

/// Iterator over the records of a report; a truncated record yields one
/// `Err` and then the iterator ends.
#[derive(Clone, Debug)]
pub struct MldRecordsIter<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> MldRecordsIter<'a> {
    /// Iterate over `count` records at the start of `records`.
    pub fn new(records: &'a [u8], count: u16) -> Self {
        MldRecordsIter { rest: records, left: count }
    }
}

impl<'a> Iterator for MldRecordsIter<'a> {
    type Item = Result<MldAddressRecord<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        match MldAddressRecord::parse(self.rest) {
            Ok((rest, r)) => {
                self.rest = rest;
                self.left -= 1;
                Some(Ok(r))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for MldRecordsIter<'_> {}

/// A parsed MLDv2 report: its records, each checked to parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MldReportRepr<'a> {
    /// Number of records.
    pub num_records: u16,
    /// The records' bytes, exactly `num_records` of them (read with
    /// [`MldReportRepr::records`]).
    pub records: &'a [u8],
}

/// Length of the first `count` records of `bytes`, or the error that stops
/// them.
fn records_len(bytes: &[u8], count: u16) -> Result<usize> {
    let mut it = MldRecordsIter::new(bytes, count);
    for r in &mut it {
        r?;
    }
    Ok(bytes.len() - it.rest.len())
}

impl<'a> MldReportRepr<'a> {
    /// Parse an MLDv2 report; `Err(Unsupported)` for another ICMPv6 type,
    /// `Err(Checksum)` if `verify_checksum` and the checksum over the pseudo
    /// header of `src` and `dst` is wrong, `Err(Truncated)` if the records
    /// run past the end. The code and reserved bytes are ignored (RFC 3810
    /// section 5.2), and so are bytes after the last record.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<Self> {
        let buf: &'a [u8] = <T as AsRef<[u8]>>::as_ref(packet.into_inner());
        if packet.msg_type() != Icmpv6Message::MldV2Report {
            return Err(Error::Unsupported);
        }
        let body = buf.get(MLD_REPORT_HEADER_LEN..).ok_or(Error::Truncated)?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let num_records = field::u16_at(buf, offs::NUM_RECORDS);
        let len = records_len(body, num_records)?;
        Ok(MldReportRepr { num_records, records: body.get(..len).unwrap_or(&[]) })
    }

    /// The records.
    pub fn records(&self) -> MldRecordsIter<'a> {
        MldRecordsIter::new(self.records, self.num_records)
    }

    /// Bytes [`MldReportRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        MLD_REPORT_HEADER_LEN + self.records.len()
    }

    /// Write the report, checksum over the pseudo header of `src` and `dst`
    /// included, at the start of `buf`.
    ///
    /// `Err(Malformed)` unless `records` holds exactly `num_records`
    /// records; `Err(Truncated)` if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
        if records_len(self.records, self.num_records).ok() != Some(self.records.len()) {
            return Err(Error::Malformed);
        }
        let buf = buf.get_mut(..self.buffer_len()).ok_or(Error::Truncated)?;
        field::set_bytes(buf, MLD_REPORT_HEADER_LEN, self.records);
        emit_header(buf, self.num_records, src, dst);
        Ok(())
    }

    /// Write a report of `records` at the start of `buf` and return its
    /// length: how a host reports the groups it joins or leaves without
    /// laying the records out first.
    ///
    /// `Err(Malformed)` for more than 65535 records or a record
    /// [`MldAddressRecord::emit`] refuses; `Err(Truncated)` if `buf` is too
    /// short.
    pub fn emit_records(
        records: &[MldAddressRecord<'_>],
        buf: &mut [u8],
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<usize> {
        let count = u16::try_from(records.len()).map_err(|_| Error::Malformed)?;
        let len = records.iter().fold(MLD_REPORT_HEADER_LEN, |n, r| n.saturating_add(r.buffer_len()));
        let buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let mut rest = buf.get_mut(MLD_REPORT_HEADER_LEN..).ok_or(Error::Truncated)?;
        for r in records {
            rest = r.emit(rest)?;
        }
        emit_header(buf, count, src, dst);
        Ok(len)
    }
}

/// Fill in the report header in front of records already in `report`.
fn emit_header(report: &mut [u8], num_records: u16, src: Ipv6Addr, dst: Ipv6Addr) {
    if let Some(h) = report.get_mut(..MLD_REPORT_HEADER_LEN) {
        h.fill(0);
    }
    let mut p = Icmpv6Packet::new_unchecked(&mut *report);
    p.set_msg_type(Icmpv6Message::MldV2Report);
    let report = p.into_inner();
    field::set_u16(report, offs::NUM_RECORDS, num_records);
    Icmpv6Packet::new_unchecked(report).fill_checksum(src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::{solicited_node, IPV6_ALL_MLDV2_ROUTERS};
    use std::vec::Vec;

    const LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0x5eff, 0xfe00, 0x5301);
    const GLOBAL: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0x5eff, 0xfe01, 0x0203);

    /// A report joining the solicited-node group of LL from LL, laid out by
    /// hand from RFC 3810 section 5.2; checksum 0x6e06 computed apart from
    /// this crate (Python's `struct`).
    const JOIN: [u8; 28] = [
        0x8f, 0x00, 0x6e, 0x06, 0, 0, 0, 1, 4, 0, 0, 0, 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0x00, 0x53,
        0x01,
    ];

    #[test]
    fn join_known() {
        let mut out = [0xaau8; 28];
        let n = MldReportRepr::emit_records(
            &[MldAddressRecord::join(solicited_node(&LL))],
            &mut out,
            LL,
            IPV6_ALL_MLDV2_ROUTERS,
        )
        .unwrap();
        assert_eq!(n, 28);
        assert_eq!(out, JOIN);
        let p = Icmpv6Packet::new_checked(&JOIN[..]).unwrap();
        let r = MldReportRepr::parse(&p, LL, IPV6_ALL_MLDV2_ROUTERS, true).unwrap();
        assert_eq!(r, MldReportRepr { num_records: 1, records: &JOIN[8..] });
        let recs: Vec<_> = r.records().collect();
        assert_eq!(recs, [Ok(MldAddressRecord::join(solicited_node(&LL)))]);
        assert_eq!(MldReportRepr::parse(&p, GLOBAL, IPV6_ALL_MLDV2_ROUTERS, true), Err(Error::Checksum));
        let mut again = [0u8; 28];
        r.emit(&mut again, LL, IPV6_ALL_MLDV2_ROUTERS).unwrap();
        assert_eq!(again, JOIN);
    }

    #[test]
    fn records_with_sources_and_aux_data() {
        let mut sources = [0u8; 32];
        sources[..16].copy_from_slice(&LL.octets());
        sources[16..].copy_from_slice(&GLOBAL.octets());
        let aux = [1, 2, 3, 4, 5, 6, 7, 8];
        let group = Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 0, 0x101);
        let records = [
            MldAddressRecord::join(solicited_node(&LL)),
            MldAddressRecord {
                record_type: MldRecordType::AllowNewSources,
                multicast_addr: group,
                sources: &sources,
                aux_data: &aux,
            },
            MldAddressRecord::leave(solicited_node(&GLOBAL)),
            MldAddressRecord {
                record_type: MldRecordType::Unknown(77),
                multicast_addr: group,
                sources: &[],
                aux_data: &[],
            },
        ];
        let mut buf = [0u8; 200];
        let n = MldReportRepr::emit_records(&records, &mut buf, LL, IPV6_ALL_MLDV2_ROUTERS).unwrap();
        assert_eq!(n, 8 + 20 + (20 + 32 + 8) + 20 + 20);
        // Trailing bytes after the records are not part of them.
        let p = Icmpv6Packet::new_checked(&buf[..n]).unwrap();
        let r = MldReportRepr::parse(&p, LL, IPV6_ALL_MLDV2_ROUTERS, true).unwrap();
        assert_eq!(r.num_records, 4);
        let back: Vec<_> = r.records().map(|r| r.unwrap()).collect();
        assert_eq!(back, records);
        assert_eq!(back[1].sources().collect::<Vec<_>>(), [LL, GLOBAL]);
        assert_eq!(buf[28 + 1], 2); // aux data length in words
        let padded = Icmpv6Packet::new_unchecked(&buf[..n + 4]);
        let r = MldReportRepr::parse(&padded, LL, IPV6_ALL_MLDV2_ROUTERS, false).unwrap();
        assert_eq!(r.records.len(), n - 8);
    }

    #[test]
    fn truncated_and_wrong() {
        let p = Icmpv6Packet::new_unchecked(&JOIN[..27]);
        assert_eq!(MldReportRepr::parse(&p, LL, IPV6_ALL_MLDV2_ROUTERS, false), Err(Error::Truncated));
        let mut two = JOIN;
        two[7] = 2;
        let p = Icmpv6Packet::new_unchecked(&two[..]);
        assert_eq!(MldReportRepr::parse(&p, LL, IPV6_ALL_MLDV2_ROUTERS, false), Err(Error::Truncated));
        let mut sources = JOIN;
        sources[11] = 1; // one source claimed, none there
        let p = Icmpv6Packet::new_unchecked(&sources[..]);
        assert_eq!(MldReportRepr::parse(&p, LL, IPV6_ALL_MLDV2_ROUTERS, false), Err(Error::Truncated));
        let mut query = JOIN;
        query[0] = 130;
        let p = Icmpv6Packet::new_unchecked(&query[..]);
        assert_eq!(MldReportRepr::parse(&p, LL, IPV6_ALL_MLDV2_ROUTERS, false), Err(Error::Unsupported));
        let p = Icmpv6Packet::new_unchecked(&JOIN[..7]);
        assert_eq!(MldReportRepr::parse(&p, LL, IPV6_ALL_MLDV2_ROUTERS, false), Err(Error::Truncated));
        let mut it = MldRecordsIter::new(&JOIN[8..27], 3);
        assert_eq!(it.next(), Some(Err(Error::Truncated)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn emit_errors() {
        let bad = MldReportRepr { num_records: 2, records: &JOIN[8..] };
        assert_eq!(bad.emit(&mut [0u8; 64], LL, IPV6_ALL_MLDV2_ROUTERS), Err(Error::Malformed));
        let bad = MldReportRepr { num_records: 1, records: &JOIN[4..] };
        assert_eq!(bad.emit(&mut [0u8; 64], LL, IPV6_ALL_MLDV2_ROUTERS), Err(Error::Malformed));
        let ok = MldReportRepr { num_records: 1, records: &JOIN[8..] };
        assert_eq!(ok.emit(&mut [0u8; 27], LL, IPV6_ALL_MLDV2_ROUTERS), Err(Error::Truncated));
        let odd = MldAddressRecord { sources: &[0; 15], ..MldAddressRecord::join(LL) };
        assert_eq!(odd.emit(&mut [0u8; 64]), Err(Error::Malformed));
        let odd = MldAddressRecord { aux_data: &[0; 3], ..MldAddressRecord::join(LL) };
        assert_eq!(odd.emit(&mut [0u8; 64]), Err(Error::Malformed));
        let big = [0u8; 1024];
        let too_much_aux = MldAddressRecord { aux_data: &big, ..MldAddressRecord::join(LL) };
        assert_eq!(too_much_aux.emit(&mut [0u8; 2048]), Err(Error::Malformed));
        let recs = [MldAddressRecord::join(LL)];
        assert_eq!(MldReportRepr::emit_records(&recs, &mut [0u8; 27], LL, LL), Err(Error::Truncated));
    }

    #[test]
    fn record_types() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(MldRecordType::from(v)), v);
        }
    }
}

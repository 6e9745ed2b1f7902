//! The datagram records netd packs into a client's buffer, read as the
//! client library reads them (`nagare_request::records`): the input's
//! first byte is the record count the completion claims, the next two
//! the length it claims, the rest the buffer. No panic, and every record
//! read (an IPv6 sender's address too) lies within the claimed length and
//! the buffer, in order.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_request::records::{Records, RECORD_ADDR6, RECORD_HEADER};

fuzz_target!(|data: &[u8]| {
    let [count, a, b, buffer @ ..] = data else { return };
    let len = usize::from(u16::from_le_bytes([*a, *b])).min(buffer.len());
    let mut records = Records::new(u32::from(*count), len);
    let mut last_end = 0;
    while let Ok(Some(at)) = records.next_header() {
        let mut header = [0u8; RECORD_HEADER];
        header.copy_from_slice(&buffer[at..at + RECORD_HEADER]);
        let Ok(r) = records.take(&header) else { break };
        assert!(r.payload.start >= last_end && r.payload.end <= len, "{r:?} past {len}");
        assert!(r.payload.len() as u64 <= u64::from(r.whole));
        // An IPv6 sender's address lies between the header and the payload.
        if let Some(addr) = r.addr6 {
            assert!(addr == at + RECORD_HEADER && addr + RECORD_ADDR6 == r.payload.start, "{r:?} at {at}");
        }
        last_end = r.payload.end;
    }
});

//! Fuzzes `VersionEdit::decode`: arbitrary bytes must decode or fail without
//! panicking, and an edit that decodes must survive `encode` + `decode`
//! unchanged, with `encode` a fixed point from then on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shale_format::version_edit::VersionEdit;

fuzz_target!(|data: &[u8]| {
    let Ok(edit) = VersionEdit::decode(data) else {
        return;
    };
    let encoded = edit.encode();
    // The re-encoding is never longer than the input would justify: every
    // field it writes was read from at least as many bytes (deleted files
    // are a set, so duplicates only shrink it).
    assert!(
        encoded.len() <= data.len(),
        "re-encoding grew from {} to {} bytes",
        data.len(),
        encoded.len()
    );
    let again = match VersionEdit::decode(&encoded) {
        Ok(again) => again,
        Err(err) => panic!("re-encoded edit does not decode: {err}\n{edit:?}"),
    };
    assert_eq!(again, edit, "decode(encode(edit)) != edit");
    assert_eq!(again.encode(), encoded, "encode is not a fixed point");
});

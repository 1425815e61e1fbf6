//! Unguessable values (upload ids, generations, request ids), from the operating system's
//! CSPRNG: a guessable upload id would let one seller read another's upload.

/// `N` random bytes.
pub fn secure_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // The OS CSPRNG does not fail on a working system; if it ever does, nothing that needs an
    // unguessable id can go on.
    #[allow(clippy::expect_used)]
    aws_lc_rs::rand::fill(&mut bytes).expect("the system's random number generator failed");
    bytes
}

/// `N` random bytes as lowercase hex (`2N` characters).
pub fn secure_hex<const N: usize>() -> String {
    hex::encode(secure_bytes::<N>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_differ_and_have_their_length() {
        let (a, b) = (secure_hex::<16>(), secure_hex::<16>());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}

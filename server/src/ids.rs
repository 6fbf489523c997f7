//! Ids, callback ids and keys: at most [`MAX_ID_BYTES`], never blank. A
//! leaf shared by the routes, auth and the demo.

use taskwire_core::value::is_blank;

use crate::error::ApiError;

/// Ids, callback ids and keys are at most this many bytes.
pub const MAX_ID_BYTES: usize = 255;

/// Checks an id or key: non-blank, at most 255 bytes.
pub fn check_id(field: &str, id: &str) -> Result<(), ApiError> {
    if id.len() > MAX_ID_BYTES {
        return Err(ApiError::invalid(format!(
            "{field}: must be at most {MAX_ID_BYTES} bytes, got {}",
            id.len()
        )));
    }
    if is_blank(id) {
        return Err(ApiError::invalid(format!("{field}: must not be blank")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_limited() {
        assert!(check_id("taskId", &"x".repeat(255)).is_ok());
        assert!(check_id("taskId", &"x".repeat(256)).is_err());
        assert!(check_id("taskId", " ").is_err());
    }
}

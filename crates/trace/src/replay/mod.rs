//! Replay (placeholder being written).

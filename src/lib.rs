//! agent-day2 library (skeleton).

//! blockwise façade.

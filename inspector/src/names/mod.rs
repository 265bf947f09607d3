//! Names as people read them, in one place: type and frame names (`types`), futures made from
//! closures (`closures`), source paths (`paths`), and what a function's path says of its code
//! (`code`). Every stage that shows or compares a name asks here; nothing here knows a stage.

mod closures;
pub mod code;
mod paths;
mod types;

pub use closures::closure_named;
pub use paths::{in_unit, short_path};
pub use types::{
    ARGS_MAX, NAME_MAX, base_name, brief, display_name, matching_close, path_of, short, short_type,
};

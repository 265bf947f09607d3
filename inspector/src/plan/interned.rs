//! The plan's frame locals as the plan cache keeps them: their repeated strings (the functions
//! they are in, the files they are declared in; a function has many locals, a file many
//! functions) written once in a table and named by index, then shared again when read back. Every
//! dump of a cached build reads the whole plan: these strings were most of its bytes.

use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::values::FrameLocalPlan;
use crate::dwarf::Location;
use crate::model::{FastMap, Loc};

#[derive(Serialize, Deserialize)]
struct Wire {
    strings: Vec<Arc<str>>,
    locals: Vec<WireLocal>,
}

#[derive(Serialize, Deserialize)]
struct WireLocal {
    function: u32,
    name: u32,
    scope: (u64, u64),
    location: Location,
    depth: u16,
    ty: u32,
    /// The file's index, the line and the column.
    declared: Option<(u32, u32, u32)>,
}

/// Writes `locals` with each string once.
pub fn serialize<S: Serializer>(locals: &[FrameLocalPlan], s: S) -> Result<S::Ok, S::Error> {
    let mut index: FastMap<Arc<str>, u32> = FastMap::default();
    let mut strings: Vec<Arc<str>> = Vec::new();
    let mut id = |text: &Arc<str>| {
        *index.entry(text.clone()).or_insert_with(|| {
            strings.push(text.clone());
            (strings.len() - 1) as u32
        })
    };
    let locals = (locals.iter())
        .map(|l| WireLocal {
            function: id(&l.function),
            name: id(&l.name),
            scope: l.scope,
            location: l.location.clone(),
            depth: l.depth,
            ty: l.ty,
            declared: (l.declared.as_ref()).map(|d| (id(&d.file), d.line, d.column)),
        })
        .collect();
    Wire { strings, locals }.serialize(s)
}

/// Reads what [`serialize`] wrote, each string shared by the locals that name it; an index past
/// the table is an error (a damaged file).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<FrameLocalPlan>, D::Error> {
    let wire = Wire::deserialize(d)?;
    let text = |i: u32| {
        (wire.strings.get(i as usize).cloned())
            .ok_or_else(|| D::Error::custom("a frame local names a string the plan has not"))
    };
    (wire.locals.iter())
        .map(|l| {
            Ok(FrameLocalPlan {
                function: text(l.function)?,
                name: text(l.name)?,
                scope: l.scope,
                location: l.location.clone(),
                depth: l.depth,
                ty: l.ty,
                declared: match l.declared {
                    Some((file, line, column)) => Some(Loc {
                        file: text(file)?,
                        line,
                        column,
                    }),
                    None => None,
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf::{FrameBase, Place};

    fn local(function: &str, name: &str, line: u32) -> FrameLocalPlan {
        FrameLocalPlan {
            function: function.into(),
            name: name.into(),
            scope: (0x10, 0x20),
            location: Location::Whole(Place::Frame {
                base: FrameBase::Cfa,
                offset: -16,
            }),
            depth: 2,
            ty: 7,
            declared: Some(Loc {
                file: "src/app.rs".into(),
                line,
                column: 9,
            }),
        }
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Holder(#[serde(with = "super")] Vec<FrameLocalPlan>);

    #[test]
    fn frame_locals_come_back_as_they_went_their_strings_written_once_and_shared() {
        let locals = vec![
            local("app::worker::run", "guard", 12),
            local("app::worker::run", "permit", 13),
            FrameLocalPlan {
                declared: None,
                ..local("app::feeder", "tx", 30)
            },
        ];
        let bytes = postcard::to_stdvec(&Holder(locals.clone())).unwrap();
        let once = |s: &str| {
            bytes
                .windows(s.len())
                .filter(|w| *w == s.as_bytes())
                .count()
        };
        assert_eq!((once("app::worker::run"), once("src/app.rs")), (1, 1));
        let back: Holder = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.0, locals);
        assert!(Arc::ptr_eq(&back.0[0].function, &back.0[1].function));
    }

    #[test]
    fn an_index_past_the_table_is_a_damaged_plan_not_a_panic() {
        let wire = Wire {
            strings: vec!["app::f".into()],
            locals: vec![WireLocal {
                function: 0,
                name: 5,
                scope: (0, 1),
                location: Location::Whole(Place::Register(3)),
                depth: 0,
                ty: 0,
                declared: None,
            }],
        };
        let bytes = postcard::to_stdvec(&wire).unwrap();
        assert!(postcard::from_bytes::<Holder>(&bytes).is_err());
    }
}

//! Typed ids read straight from a row: a column holding an agent id, an external ref or
//! a tenant decodes into the domain type, through the same `parse` that guards the API,
//! so a corrupt value is a decode error rather than an id that could not exist.

use sqlx::{Database, Decode, Type, error::BoxDynError};

use crate::domain::ids::{AgentId, ExternalRef, TenantId};

/// Text columns whose values parse into `$id`.
macro_rules! text_id {
    ($($id:ty),*) => {$(
        impl<DB: Database> Type<DB> for $id
        where
            String: Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <String as Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <String as Type<DB>>::compatible(ty)
            }
        }

        impl<'r, DB: Database> Decode<'r, DB> for $id
        where
            String: Decode<'r, DB>,
        {
            fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
                Ok(<$id>::parse(String::decode(value)?)?)
            }
        }
    )*};
}

text_id!(AgentId, ExternalRef, TenantId);

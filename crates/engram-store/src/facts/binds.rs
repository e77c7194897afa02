//! Binds that the statements about facts share, each written once: the owner, an owner
//! set, and a [`FactFilter`].

use chrono::{DateTime, Utc};
use sqlx::{
    Database, Encode, Type,
    query::{Query, QueryAs},
};

use super::FactFilter;
use crate::domain::owner::{Owner, OwnerSet};

/// Implements a bind trait for both kinds of statement, `sqlx::query`'s and
/// `sqlx::query_as`'s, whose `bind` methods share no trait: one body serves both, binding
/// to `$query`. The bounds cover every type these traits bind.
macro_rules! for_both_queries {
    ($trait:ident, fn $method:ident($query:ident, $arg:ident: $ty:ty) $body:block) => {
        for_both_queries!(@impl [DB] Query<'q, DB, <DB as Database>::Arguments>,
            $trait, $method, $query, $arg, $ty, $body);
        for_both_queries!(@impl [DB, O] QueryAs<'q, DB, O, <DB as Database>::Arguments>,
            $trait, $method, $query, $arg, $ty, $body);
    };
    (@impl [$($param:ident),+] $target:ty,
        $trait:ident, $method:ident, $query:ident, $arg:ident, $ty:ty, $body:block) => {
        impl<'q, $($param),+> $trait<'q> for $target
        where
            DB: Database,
            &'q str: Encode<'q, DB> + Type<DB>,
            Option<&'q str>: Encode<'q, DB> + Type<DB>,
            bool: Encode<'q, DB> + Type<DB>,
            Option<DateTime<Utc>>: Encode<'q, DB> + Type<DB>,
            DateTime<Utc>: Encode<'q, DB> + Type<DB>,
        {
            fn $method(self, $arg: $ty) -> Self {
                let $query = self;
                $body
            }
        }
    };
}

/// Binds an owner as `$1, $2, $3`, the way every statement about one owner's facts
/// starts.
pub(crate) trait BindOwner<'q> {
    fn bind_owner(self, owner: Owner<'q>) -> Self;
}

for_both_queries!(BindOwner, fn bind_owner(query, owner: Owner<'q>) {
    query.bind(owner.tenant().as_str()).bind(owner.agent().as_str()).bind(owner.user().as_str())
});

/// Binds an owner set as `$1, $2, $3` for the reads of [`super::reads`]: `$2` is the
/// agent alone without sharing (the statements test `agent_id = $2`), else a JSON array of
/// every agent of the set (the shared statements test membership, see
/// [`super::reads::Dialect::shared_agents`]).
pub(crate) trait BindOwners<'q> {
    fn bind_owners(self, owners: OwnerSet<'q>) -> Self;
}

/// The agents of a shared read, as the JSON array its `$2` is.
fn agents_json(owners: OwnerSet<'_>) -> String {
    serde_json::Value::from(owners.owners().map(|owner| owner.agent().as_str()).collect::<Vec<_>>()).to_string()
}

impl<'q, DB: Database, O> BindOwners<'q> for QueryAs<'q, DB, O, <DB as Database>::Arguments>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    String: Encode<'q, DB> + Type<DB>,
{
    fn bind_owners(self, owners: OwnerSet<'q>) -> Self {
        let owner = owners.owner();
        let query = self.bind(owner.tenant().as_str());
        let query = if owners.shared().is_empty() {
            query.bind(owner.agent().as_str())
        } else {
            query.bind(agents_json(owners))
        };
        query.bind(owner.user().as_str())
    }
}

/// Binds a [`FactFilter`] as `$5`–`$8`: its tag, whether superseded facts are wanted, the
/// time asked about and the expiry horizon ([`FactFilter::horizon`]), the binds of the
/// reads' `{filter}` test (see [`super::reads`]).
pub(crate) trait BindFilter<'q> {
    fn bind_filter(self, filter: FactFilter<'q>) -> Self;
}

for_both_queries!(BindFilter, fn bind_filter(query, filter: FactFilter<'q>) {
    query.bind(filter.tag).bind(filter.superseded).bind(filter.as_of).bind(filter.horizon())
});

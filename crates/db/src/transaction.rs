//! A transaction as a value: [`Transaction`] begins on a connection and
//! rolls back when it is dropped unless it was committed, so an early
//! return, a `?` or a panic on an error path cannot leave a transaction
//! open on a connection that is used again (rust-postgres's `Transaction`
//! does the same). It is for code off the measured path: a workload's
//! per-transaction path (`runner::commit`, the TPC-C and TPC-B
//! transactions) keeps calling `begin`/`commit`/`rollback` itself and
//! pays nothing for this. Nothing here prints; a rollback that fails on
//! drop is dropped with it (the connection is then closed or broken, which
//! its next call reports).

use std::ops::{Deref, DerefMut};

use crate::{Connection, DbError};

/// An open transaction on a connection: the connection's calls go through
/// it (it dereferences to the connection); [`commit`](Self::commit) ends
/// it, and dropping it uncommitted rolls it back.
#[must_use = "a transaction dropped at once is rolled back at once"]
pub struct Transaction<'c> {
    conn: &'c mut dyn Connection,
    /// Still open: to be rolled back on drop.
    open: bool,
}

impl<'c> Transaction<'c> {
    /// Begins a transaction on `conn` (its [`Connection::begin`]).
    pub fn begin(conn: &'c mut dyn Connection) -> Result<Transaction<'c>, DbError> {
        conn.begin()?;
        Ok(Transaction { conn, open: true })
    }

    /// Commits. Should the COMMIT fail, the transaction is rolled back
    /// when this returns unless the engine has ended it itself
    /// ([`Caps::failed_commit_ends_transaction`](crate::Caps): PostgreSQL,
    /// where a ROLLBACK would draw warning 25P01) or the connection is
    /// gone: the rule of the workloads' `runner::commit`. The COMMIT's
    /// error is returned either way.
    pub fn commit(mut self) -> Result<(), DbError> {
        let r = self.conn.commit();
        self.open = r.is_err() && !self.conn.caps().failed_commit_ends_transaction;
        r
    }

    /// Rolls back now, with its error (dropping rolls back too, silently).
    pub fn rollback(mut self) -> Result<(), DbError> {
        self.open = false;
        self.conn.rollback()
    }
}

impl<'c> Deref for Transaction<'c> {
    type Target = dyn Connection + 'c;

    fn deref(&self) -> &Self::Target {
        &*self.conn
    }
}

impl DerefMut for Transaction<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut *self.conn
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open && !self.conn.is_closed() {
            let _ = self.conn.rollback();
        }
    }
}

impl<'c> dyn Connection + 'c {
    /// Begins a [`Transaction`] that rolls back on drop unless committed:
    /// `let mut tx = conn.transaction()?; tx.execute(..)?; tx.commit()`.
    pub fn transaction(&mut self) -> Result<Transaction<'_>, DbError> {
        Transaction::begin(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{connect, DbUrl, Stmt};

    fn sqlite(dir: &tempfile::TempDir) -> Box<dyn Connection> {
        let url = DbUrl::parse(&format!("sqlite:{}", dir.path().join("t.db").display())).unwrap();
        let mut c = connect(&url).unwrap();
        c.batch("CREATE TABLE t (id INTEGER PRIMARY KEY)").unwrap();
        c
    }

    fn count(c: &mut dyn Connection) -> i64 {
        c.query_one(&Stmt::new("SELECT COUNT(*) FROM t"), &[]).unwrap().int(0).unwrap()
    }

    /// An insert, then a second one that fails (the same key) and returns
    /// early through `?`: the guard rolls the first back.
    fn insert_twice(c: &mut dyn Connection, commit: bool) -> Result<(), DbError> {
        let ins = Stmt::new("INSERT INTO t (id) VALUES ($1)");
        let mut tx = c.transaction()?;
        tx.execute(&ins, &[1.into()])?;
        if commit {
            return tx.commit();
        }
        tx.execute(&ins, &[1.into()])?;
        tx.commit()
    }

    #[test]
    fn an_uncommitted_transaction_rolls_back_on_drop_and_the_connection_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = sqlite(&dir);
        assert!(insert_twice(c.as_mut(), false).is_err());
        assert_eq!(count(c.as_mut()), 0, "the error path rolled the first insert back");
        // No transaction was left open: a new one begins.
        insert_twice(c.as_mut(), true).unwrap();
        assert_eq!(count(c.as_mut()), 1, "committed");
        let tx = c.transaction().unwrap();
        tx.rollback().unwrap();
        c.begin().expect("an explicit rollback ends it too");
        c.rollback().unwrap();
    }

    #[test]
    fn a_commit_that_fails_with_the_transaction_open_rolls_it_back() {
        // SQLite keeps the transaction open when a deferred foreign key
        // fails its COMMIT (`failed_commit_ends_transaction` is false).
        let dir = tempfile::tempdir().unwrap();
        let mut c = sqlite(&dir);
        assert!(!c.caps().failed_commit_ends_transaction);
        c.batch(
            "PRAGMA foreign_keys = ON; \
             CREATE TABLE child (pid INTEGER REFERENCES t (id) DEFERRABLE INITIALLY DEFERRED)",
        )
        .unwrap();
        let mut tx = c.transaction().unwrap();
        tx.execute(&Stmt::new("INSERT INTO t (id) VALUES (7)"), &[]).unwrap();
        tx.execute(&Stmt::new("INSERT INTO child (pid) VALUES (99)"), &[]).unwrap();
        assert!(tx.commit().is_err(), "the deferred key fails the COMMIT");
        assert_eq!(count(c.as_mut()), 0, "rolled back, not left open");
        c.begin().expect("no transaction left open");
        c.rollback().unwrap();
    }
}

import SQLite from 'better-sqlite3';
import { afterEach, describe, expect, test } from 'vitest';
import { withStatementCache } from '../src/store/sqlite/open-sqlite.js';

/** The statements Kysely's SQLite driver prepares are kept and reused, safely. */
describe('the SQLite statement cache', () => {
  let database: SQLite.Database;
  afterEach(() => database.close());

  function open(): SQLite.Database {
    database = new SQLite(':memory:');
    database.exec('create table t (id integer primary key, name text)');
    return withStatementCache(database);
  }

  test('one text is prepared once, and its statement answers each call with that call’s parameters', () => {
    const cached = open();
    const insert = cached.prepare('insert into t (name) values (?)');
    expect(cached.prepare('insert into t (name) values (?)')).toBe(insert);
    insert.run('a');
    cached.prepare('insert into t (name) values (?)').run('b');
    expect(cached.prepare('select name from t order by id').all()).toEqual([{ name: 'a' }, { name: 'b' }]);
    expect(cached.prepare('select name from t where name = ?').all('b')).toEqual([{ name: 'b' }]);
  });

  test('a statement still being iterated is not handed out again: the caller gets a fresh one', () => {
    const cached = open();
    for (const name of ['a', 'b', 'c']) cached.prepare('insert into t (name) values (?)').run(name);
    const text = 'select name from t order by id';
    const names: string[] = [];
    for (const row of cached.prepare(text).iterate() as Iterable<{ name: string }>) {
      // Would throw "This statement is busy executing a query" if it were the same statement.
      names.push(`${row.name}:${(cached.prepare(text).all() as unknown[]).length}`);
    }
    expect(names).toEqual(['a:3', 'b:3', 'c:3']);
  });

  test('a statement prepared before a schema change reads the table as it is now', () => {
    const cached = open();
    cached.prepare('insert into t (name) values (?)').run('a');
    expect(cached.prepare('select * from t').all()).toEqual([{ id: 1, name: 'a' }]);
    cached.exec('alter table t add column extra text');
    expect(cached.prepare('select * from t').all()).toEqual([{ id: 1, name: 'a', extra: null }]);
  });

  test('the cache is bounded: past 500 texts the least recently used is prepared again', () => {
    const cached = open();
    const first = cached.prepare('select 0');
    const kept = cached.prepare('select 1');
    for (let i = 2; i < 501; i++) {
      cached.prepare(`select ${i}`);
      if (i % 100 === 0) expect(cached.prepare('select 1')).toBe(kept);
    }
    expect(cached.prepare('select 1')).toBe(kept);
    expect(cached.prepare('select 0')).not.toBe(first);
  });

  test('everything else is the database’s own', () => {
    const cached = open();
    expect(cached.inTransaction).toBe(false);
    cached.exec('begin');
    expect(cached.inTransaction).toBe(true);
    cached.exec('rollback');
    expect(cached.pragma('foreign_keys', { simple: true })).toBe(database.pragma('foreign_keys', { simple: true }));
  });
});

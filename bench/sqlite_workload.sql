-- sqlite_workload.sql - an allocation-heavy SQL workload for Debian's sqlite3 shell (bench/run.sh):
-- an in-memory database of @n rows (the harness sets it: sqlite3 -cmd '.parameter set @n N' :memory:),
-- built, indexed, grouped, joined, updated, partly deleted, turned into JSON and sorted.  Everything is
-- deterministic (no random()), so instruction counts repeat.
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, val REAL, tags TEXT);
CREATE TABLE grp(id INTEGER PRIMARY KEY, label TEXT);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < @n)
INSERT INTO item SELECT i, printf('name-%05d-%x', (i * 7919) % 50021, i * 2654435761 % 4294967291),
                        i % 997, (i * 31 % 1000) / 7.0, printf('t%d,t%d', i % 13, i % 17) FROM c;
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 996)
INSERT INTO grp SELECT i, printf('group %d: %s', i, substr('abcdefghijklmnopqrstuvwxyz', i % 26 + 1)) FROM c;
CREATE INDEX item_name ON item(name);
CREATE INDEX item_grp_val ON item(grp, val);
SELECT g.label, count(*), round(sum(i.val), 2), length(group_concat(substr(i.name, 6, 5), ';'))
  FROM item i JOIN grp g ON g.id = i.grp GROUP BY g.id ORDER BY count(*) DESC, g.id LIMIT 3;
UPDATE item SET tags = tags || printf(',u%d', id % 101), name = upper(name) WHERE id % 3 = 0;
DELETE FROM item WHERE id % 7 = 0;
SELECT count(*), sum(length(tags)), max(name) FROM item WHERE name LIKE 'NAME-1%';
SELECT length(json_group_array(json_object('id', id, 'name', name, 'tags', tags))) FROM item WHERE grp < 500;
SELECT count(DISTINCT substr(name, 6, 3)), count(DISTINCT tags) FROM item;
SELECT id, name FROM item ORDER BY tags DESC, name LIMIT 2;
CREATE TABLE copy AS SELECT * FROM item ORDER BY val, id;
SELECT count(*) FROM copy c JOIN item i ON i.id = c.id + 1 WHERE c.grp = i.grp - 1;

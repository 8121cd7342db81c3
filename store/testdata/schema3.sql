CREATE TABLE source_states (
	skey INTEGER NOT NULL,
	name TEXT NOT NULL,
	fingerprint TEXT NOT NULL DEFAULT '',
	consecutive_failures INTEGER NOT NULL DEFAULT 0,
	consecutive_throttles INTEGER NOT NULL DEFAULT 0,
	next_run_at INTEGER,
	last_run_at INTEGER,
	last_success_at INTEGER,
	last_error TEXT NOT NULL DEFAULT '',
	last_outcome TEXT NOT NULL DEFAULT '',
	breaker_state TEXT NOT NULL DEFAULT '',
	breaker_until INTEGER,
	error_reason TEXT NOT NULL DEFAULT '',
	paused INTEGER NOT NULL DEFAULT 0,
	paused_reason TEXT NOT NULL DEFAULT '',
	polls_total INTEGER NOT NULL DEFAULT 0,
	failures_total INTEGER NOT NULL DEFAULT 0,
	throttled_total INTEGER NOT NULL DEFAULT 0,
	history_seq INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (skey, name)
) WITHOUT ROWID;
CREATE TABLE history_tail (
	skey INTEGER NOT NULL,
	source TEXT NOT NULL,
	data BLOB NOT NULL,
	last_seq INTEGER NOT NULL DEFAULT 0,
	keep_from INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (skey, source)
) WITHOUT ROWID;
CREATE TABLE history_blocks (
	skey INTEGER NOT NULL,
	source TEXT NOT NULL,
	last_seq INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (skey, source, last_seq)
) WITHOUT ROWID;
CREATE TABLE `commands` (`id` integer PRIMARY KEY AUTOINCREMENT,`source` text,`action` text,`reason` text,`created_at` datetime,`done_at` datetime,`result` text,`code` text);
CREATE INDEX `idx_commands_done_at` ON `commands`(`done_at`);
CREATE TABLE `pacer_meta` (`key` text,`value` text,`updated_at` datetime,PRIMARY KEY (`key`));
INSERT INTO source_states VALUES(-8391374737355262590,'api-2','9f86d0',0,0,1796040060123456,1796040000123456,1796040000123456,'','success','closed',NULL,'',0,'',1,0,0,1,1796180667758775);
INSERT INTO source_states VALUES(-6875232148147791086,'never polled','',0,0,NULL,NULL,NULL,'','','',NULL,'',0,'',0,0,0,0,1796180667758775);
INSERT INTO source_states VALUES(-6511513949906255224,'api-1','3f2a9c',7,2,1796013360123456,1796013300123456,1796009700123456,'GET https://example.com/status: 502 Bad Gateway','failure','open',1796013330123456,'10 consecutive failures; last: boom',1,'maintenance',120,7,3,12,1796180667758775);
INSERT INTO history_tail VALUES(-8391374737355262590,'api-2',X'0280C9ADE3A4DFB00606010001900304',1,0);
INSERT INTO history_tail VALUES(-6511513949906255224,'api-1',X'0A80B99EC8A6DFB0061C00036E6577046565656501900308',5,0);
INSERT INTO history_blocks VALUES(-6511513949906255224,'api-1',2,X'0280C9ADE3A4DFB006140100019003000480E5C99CA5DFB0061602016501900302');
INSERT INTO history_blocks VALUES(-6511513949906255224,'api-1',4,X'068081E6D5A5DFB00618030265650190030408809D828FA6DFB0061A0403656565020106');
INSERT INTO commands VALUES(1,'api-1','pause','maintenance','2026-12-02 03:04:27.759074+00:00',NULL,'','');
INSERT INTO commands VALUES(2,'gone','reset','','2026-12-02 03:04:27.759167+00:00','2026-12-02 03:04:27.759211+00:00','source "gone" not found','not_found');
INSERT INTO pacer_meta VALUES('schema_version','3','2026-12-02 03:04:27.754956+00:00');

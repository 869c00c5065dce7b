-- Poison-run guard: how many times in a row a worker lost the run's lease while
-- running it (died, or lost the database) without the run making progress. A claim of a run
-- whose lease expired counts one more; a checkpoint that records progress or parks the run
-- resets it; the claim that finds it at TETHER_MAX_RECOVERY_ATTEMPTS ends the run failed.
ALTER TABLE executions ADD COLUMN lost_leases integer NOT NULL DEFAULT 0;

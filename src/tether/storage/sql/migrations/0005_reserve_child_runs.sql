-- PLACEHOLDER on branch `tokens` only: number 0005 belongs to the dagrun branch (child_runs).
-- Drop this file when merging (dagrun's 0005 takes its place); 0006 does not depend on it.
SELECT 1;

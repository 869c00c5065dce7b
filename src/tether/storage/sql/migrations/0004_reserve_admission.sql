-- PLACEHOLDER on branch `dagrun` only: number 0004 belongs to the admission branch. Drop this
-- file when merging (admission's 0004 takes its place); 0005 below does not depend on it.
SELECT 1;

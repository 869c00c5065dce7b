-- PLACEHOLDER on branch `tenants` only: number 0006 belongs to the tokens branch (tokens and
-- audit). Drop this file when merging (tokens' 0006 takes its place); 0007 does not depend on it.
SELECT 1;

"""Long-running work: a job is submitted, queued durably, claimed by a runner under a
lease and run stage by stage (validate → infer → postprocess by default), each stage's
output kept in the blob store by digest; see docs/jobs.md."""

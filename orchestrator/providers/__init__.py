"""Candidate generators. Each implements `CandidateProvider` from `base`."""

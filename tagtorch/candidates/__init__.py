"""Candidate generation: association rules, candidate lists and their features."""

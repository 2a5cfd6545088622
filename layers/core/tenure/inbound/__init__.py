"""Inbound email, pure: SES/SNS envelopes, MIME parsing, rule matching."""

"""The ownership ledger: per slot a state, an owner, a borrower and a fence."""

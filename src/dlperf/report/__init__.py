"""Views: everything a person reads is computed from the store. Views never measure."""

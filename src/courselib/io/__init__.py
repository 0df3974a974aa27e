"""Readers with located errors: every file a user hands the course becomes model objects or a
one-line ``CourseError`` naming file, line and field."""

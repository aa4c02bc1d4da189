module server

go 1.24.3
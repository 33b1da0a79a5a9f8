module github.com/leafraft/leafraft/clients/go

go 1.19

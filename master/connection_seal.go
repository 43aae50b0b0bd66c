package master

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// sealPrefix marks a sealed secret's format, so that another can follow.
const sealPrefix = "v1:"

// errUnsealable means a stored secret could not be opened: it was sealed
// under another cluster key, or the row was altered.
var errUnsealable = errors.New("the stored secret cannot be opened with this cluster's key (was the cluster key changed?)")

// secretAEAD is AES-256-GCM under a key derived from the cluster key, for
// the secrets of connections: a database dump alone does not reveal them.
func secretAEAD(clusterKey string) (cipher.AEAD, error) {
	if clusterKey == "" {
		return nil, errors.New("master: no cluster key to seal secrets with (the master has not started)")
	}
	key, err := hkdf.Key(sha256.New, []byte(clusterKey), nil, "schedulemaster connection secret v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealSecret seals secret for the connection id (bound to it: a sealed
// value copied to another row does not open). "" stays "".
func sealSecret(clusterKey, id, secret string) (string, error) {
	if secret == "" {
		return "", nil
	}
	aead, err := secretAEAD(clusterKey)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("master: seal secret: %w", err)
	}
	out := aead.Seal(nonce, nonce, []byte(secret), []byte("connection:"+id))
	return sealPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// openSecret opens what sealSecret made for id.
func openSecret(clusterKey, id, sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	raw, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return "", errUnsealable
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return "", errUnsealable
	}
	aead, err := secretAEAD(clusterKey)
	if err != nil {
		return "", err
	}
	if len(b) < aead.NonceSize() {
		return "", errUnsealable
	}
	plain, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte("connection:"+id))
	if err != nil {
		return "", errUnsealable
	}
	return string(plain), nil
}

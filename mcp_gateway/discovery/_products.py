"""Products people name in a request, to tell "do this in Spotify" from a request the catalog serves.

"Start a Spotify playlist for running" over a gateway serving YouTube reads, word for word, like a
YouTube request: the playlist, the start, the running. The one word that says it is not is the
product's name. ``named_products`` finds the names of well-known products in a request; the index
then asks whether any searched connector is that product or mentions it (``DiscoveryIndex.find``),
and when none does, the answer is unsure and says which product is missing, so the agent can tell
its user instead of acting in the wrong place.

Only names that are not also everyday words are listed: "Slack", "Square", "Box", "Notion", "Zoom",
"Linear", "Wise" or "Outlook" name products and plain things alike ("the square root", "zoom in").
"""

from __future__ import annotations

from ._text import prose_words

__all__ = ["PRODUCTS", "named_products", "unserved_hint"]

PRODUCTS: dict[str, str] = {
    word: name
    for name in """
    Airtable Asana Atlassian Basecamp Bitbucket Calendly ClickUp Confluence Dropbox Evernote Figma GitHub
    GitLab Gmail Hotmail HubSpot Intercom Jira Mailchimp Miro Okta OneDrive PagerDuty Salesforce SendGrid
    Shopify Smartsheet Todoist Trello Twilio Telnyx Webex Zendesk Freshdesk ServiceNow QuickBooks Xero
    DocuSign Typeform SurveyMonkey Mailgun Mandrill Postmark Stripe PayPal Venmo Braintree Adyen Klarna
    Coinbase Robinhood Squarespace WordPress Webflow Netlify Vercel Heroku Cloudflare Datadog Grafana
    Splunk BigQuery LaunchDarkly Spotify SoundCloud Deezer Instagram Facebook TikTok Snapchat Pinterest
    Reddit LinkedIn Twitter YouTube WhatsApp Telegram WeChat Viber Uber Lyft Airbnb DoorDash Grubhub
    UberEats Instacart Netflix Hulu Amazon eBay Etsy Alexa Siri Twitch Strava Fitbit Peloton Duolingo
    Tinder Yelp Tripadvisor Expedia Skyscanner Zillow Craigslist SharePoint OneNote PowerPoint
    """.split()
    for word in (name.lower(),)
} | {"tweet": "Twitter", "tweets": "Twitter", "retweet": "Twitter"}
"""Lowercased word -> the product's name as written: products users name, none an everyday word."""


def named_products(query: str) -> dict[str, str]:
    """The products ``query`` names (``PRODUCTS``), as ``{word as indexed: product name}``, in order."""
    return {word: PRODUCTS[word] for word in prose_words(query) if word in PRODUCTS}


def unserved_hint(products: list[str]) -> str:
    """What an unsure answer tells the agent when the request names products nothing here serves."""
    names = " and ".join(products)
    return (
        f"None of the searched connectors serves {names}, which the request names: these hits are only "
        "look-alikes. Tell the user it is not connected (`connectors` lists what is), or rephrase without it."
    )
